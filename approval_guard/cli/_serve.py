"""``serve``: the local provider in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import ipaddress
import os
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from approval_guard._env import ENV_CREDENTIAL, ENV_REVIEWER_TOKEN
from approval_guard.cli._output import PROG, CliError, UsageError, say
from approval_guard.cli._signals import on_sigterm

if TYPE_CHECKING:
    from approval_guard.provider import FirstStartTokens, StoreProtocol
    from approval_guard.provider.channels.base import Channel
    from approval_guard.provider.channels.slack.settings import SlackSettings
    from approval_guard.provider.rules.config import Rules

DEFAULT_PORT = 8765


def _loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve_banner(
    args: argparse.Namespace,
    url: str,
    tokens: FirstStartTokens | None,
    rules: Rules | None = None,
) -> None:
    """What ``serve`` says when it starts; the credentials only on a new database."""
    if args.dsn:
        db = "PostgreSQL"
    else:
        db = args.db if args.db == ":memory:" else str(Path(args.db).resolve())
    say(f"{PROG}: provider listening on {url} (database: {db})")
    targets = getattr(args, "webhooks", None) or ()
    if targets:
        from approval_guard.provider.channels.webhooks.signing import display_url

        shown = ", ".join(display_url(item["url"]) for item in targets)
        say(f"Webhooks: posting each request's events to {shown}")
    if getattr(args, "slack_channel", None):
        say(
            f"Slack: posting each request to {args.slack_channel}; "
            "Slack's interactivity URL is /slack/interactions"
        )
    if rules is not None:
        from approval_guard.provider.channels.webhooks.signing import display_url

        scoped = {
            f"{display_url(hook_url)} ({name})"
            for name, rule in [("defaults", rules.defaults), *rules.tools.items()]
            for hook_url, _, _ in rule.webhooks
        }
        if scoped:
            say(f"Webhooks from the rules file, for their tools only: {', '.join(sorted(scoped))}")
    if not _loopback(args.host) and not args.tls_cert:
        say(
            f"warning: listening on {args.host} over plain HTTP (--insecure-http): credentials "
            "and decisions cross the network unencrypted unless your TLS proxy is in front",
            stream=sys.stderr,
        )
    if tokens is not None and (args.instance_token or args.reviewer_token):
        say("First start: the credentials given were created (stored only as hashes).")
    elif tokens is not None:
        # The one deliberate print of the credentials: they are stored only as hashes.
        say()
        say("First start: these credentials are shown once and stored only as hashes.")
        say(f"  instance credential (the adapter's {ENV_CREDENTIAL}): {tokens.instance}")
        say(f"  reviewer URL (open it in a browser): {url}/?token={tokens.reviewer}")
        say(f"  reviewer token (the CLI's {ENV_REVIEWER_TOKEN}): {tokens.reviewer}")
    else:
        say(
            "The credentials were printed when this database was first started "
            "(they are stored only as hashes)."
        )
    say()
    say("Press Ctrl-C to stop.")


def _check_transport(args: argparse.Namespace) -> None:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("TLS needs both --tls-cert FILE and --tls-key FILE")
    if not _loopback(args.host) and not args.tls_cert and not args.insecure_http:
        raise CliError(
            f"refusing to serve plain HTTP on {args.host}: tokens and decisions would cross the "
            "network unencrypted; give --tls-cert and --tls-key, or put a TLS proxy in front "
            "and pass --insecure-http, or listen on 127.0.0.1"
        )


def _load_rules(args: argparse.Namespace) -> Rules | None:
    """``--rules FILE`` read now: a bad file stops ``serve`` before it binds (exit code 2)."""
    if not getattr(args, "rules", None):
        return None
    from approval_guard.provider.rules.config import RulesError, load_rules

    try:
        return load_rules(args.rules)
    except RulesError as exc:
        raise UsageError(str(exc)) from None


def _open_store(args: argparse.Namespace) -> str | StoreProtocol:
    """The store ``serve`` runs on: the SQLite file, or PostgreSQL for ``--dsn``."""
    if not args.dsn:
        return str(args.db)
    try:
        from approval_guard.provider import open_store
    except ImportError as exc:
        raise CliError(
            f"--dsn needs the postgres extra: pip install 'approval-guard[postgres]' ({exc})"
        ) from None
    try:
        return open_store(dsn=args.dsn)
    except Exception as exc:
        raise CliError(
            f"cannot open the PostgreSQL database: {safe_dsn_error(exc, args.dsn)}"
        ) from None


def safe_dsn_error(exc: BaseException, dsn: str) -> str:
    """An error's text without the DSN's password in it."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    from urllib.parse import urlsplit

    with contextlib.suppress(ValueError):
        password = urlsplit(dsn).password
        if password:
            text = text.replace(password, "***")
    return text


def add_channel_options(serve: argparse.ArgumentParser, env: dict[str, str]) -> None:
    """Every registered channel's flags (webhooks, Slack, email...)."""
    from approval_guard.provider.channels.registry import kinds

    for kind in kinds():
        kind.add_arguments(serve, env)


def _given_channels(args: argparse.Namespace) -> list[Channel]:
    """The channels the registered kinds make from the flags (beyond the first three)."""
    from approval_guard.provider.channels.base import ChannelSettingsError
    from approval_guard.provider.channels.registry import kinds

    found = []
    for kind in kinds():
        try:
            channel = kind.from_args(args, os.environ, public_url=args.public_url)
        except ChannelSettingsError as exc:  # its message never quotes a secret
            raise UsageError(str(exc)) from None
        if channel is not None:
            found.append(channel)
    return found


def add_slack_options(serve: argparse.ArgumentParser, env: dict[str, str]) -> None:
    """``--slack-bot-token``, ``--slack-signing-secret``, ``--slack-channel`` and the API URL."""
    from approval_guard.provider.channels.slack.settings import add_slack_arguments

    add_slack_arguments(serve, env)


def _slack(args: argparse.Namespace, rules: Rules | None) -> SlackSettings | None:
    """The Slack app the options (and the rules file) ask for, or None; exit 2 for a bad one."""
    from approval_guard.provider.channels.slack.settings import settings_from_args
    from approval_guard.provider.rules.config import NO_RULES

    try:
        slack = settings_from_args(args, rules or NO_RULES)
    except ValueError as exc:  # its message never quotes a secret
        raise UsageError(str(exc)) from None
    if slack is not None and importlib.util.find_spec("slack_sdk") is None:
        raise CliError(
            "Slack needs slack-sdk (the slack extra): pip install 'approval-guard[slack]'"
        )
    return slack


def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: run the provider in the foreground until Ctrl-C or SIGTERM (graceful)."""
    try:
        from approval_guard.provider import ProviderServer
    except ImportError as exc:
        raise CliError(str(exc)) from None

    _check_transport(args)
    rules = _load_rules(args)
    from approval_guard.provider.channels.webhooks.settings import targets_from_args

    targets = targets_from_args(args)
    rule_hooks = rules is not None and any(
        rule.webhooks for rule in [rules.defaults, *rules.tools.values()]
    )
    if (targets or rule_hooks) and importlib.util.find_spec("httpx") is None:
        # The provider posts webhooks with httpx; the CLI itself never makes that request.
        raise CliError(
            "--webhook needs httpx (the server extra): pip install 'approval-guard[server]'"
        )
    slack = _slack(args, rules)
    from approval_guard.provider.channels.email.settings import email_from_args

    try:
        # Read now: the SMTP password may come from $APPROVAL_GUARD_SMTP_PASSWORD.
        email = email_from_args(args, os.environ)
    except ValueError as exc:  # its message never quotes the URL (it may hold a password)
        raise UsageError(str(exc)) from None
    channels = _given_channels(args)
    store = _open_store(args)
    try:
        server = ProviderServer(
            db=store,
            host=args.host,
            port=args.port,
            instance_token=args.instance_token,
            reviewer_token=args.reviewer_token,
            tls_certfile=args.tls_cert,
            tls_keyfile=args.tls_key,
            rules=rules,
            webhooks=targets,
            public_url=args.public_url,
            slack=slack,
            email=email,
            channels=channels,
        )
    except ValueError as exc:  # a given token: bad, or not this database's
        _close(store)
        raise CliError(str(exc)) from None
    except OSError as exc:
        _close(store)
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the database {args.db}: {exc}") from None
    server.start()
    if not server.running:
        _close(store)
        raise CliError("the provider could not start (see the log above)")
    stop = threading.Event()
    try:
        with on_sigterm(stop.set):
            _serve_banner(args, server.url, server.first_start_tokens, rules)
            if email is not None:
                say(f"Email: mailing approval links through {email.smtp.display}")
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:  # wherever Ctrl-C lands after the start, it means "stop"
        pass
    finally:
        # Graceful: waiting polls are answered with the current state, nothing is cut.
        server.shutdown()
        _close(store)
    say(f"{PROG}: provider stopped")
    return 0


def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()
