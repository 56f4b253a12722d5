"""``serve``: the local provider in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import ipaddress
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from approval_guard._env import ENV_CREDENTIAL, ENV_REVIEWER_TOKEN

from ._output import PROG, CliError, say
from ._signals import on_sigterm

if TYPE_CHECKING:
    from approval_guard.provider import FirstStartTokens

DEFAULT_PORT = 8765


def _loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve_banner(args: argparse.Namespace, url: str, tokens: FirstStartTokens | None) -> None:
    """What ``serve`` says when it starts; the credentials only on a new database."""
    db = args.db if args.db == ":memory:" else str(Path(args.db).resolve())
    say(f"{PROG}: provider listening on {url} (database: {db})")
    if not _loopback(args.host):
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


def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: run the provider in the foreground until Ctrl-C."""
    from approval_guard.provider import ProviderServer

    if not _loopback(args.host) and not args.insecure_http:
        raise CliError(
            f"refusing to serve plain HTTP on {args.host}: tokens and decisions would cross the "
            "network unencrypted, and this server has no TLS of its own; put a TLS proxy in "
            "front of it and pass --insecure-http, or listen on 127.0.0.1"
        )
    try:
        server = ProviderServer(
            db=args.db,
            host=args.host,
            port=args.port,
            instance_token=args.instance_token,
            reviewer_token=args.reviewer_token,
        )
    except ValueError as exc:  # a given token: bad, or not this database's
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:
        raise CliError(f"cannot open the database {args.db}: {exc}") from None
    server.start()
    stop = threading.Event()
    try:
        with on_sigterm(stop.set):
            _serve_banner(args, server.url, server.first_start_tokens)
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:  # wherever Ctrl-C lands after the start, it means "stop"
        pass
    finally:
        server.stop()
    say(f"{PROG}: provider stopped")
    return 0
