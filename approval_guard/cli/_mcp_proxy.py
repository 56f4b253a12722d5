"""``mcp-proxy``: run a stdio MCP server behind the guard, every matching tool call approved first.

::

    approval-guard mcp-proxy --guard 'write_*,delete_*' [--timeout 10m]
        [--editable TOOL:ARG ...] [--redact TOOL:PATH ...] [--listen HOST:PORT]
        [--start-timeout DUR] [--url URL] [--ledger PATH] -- COMMAND ARGS...

The provider comes as for every Guard from the environment:
``APPROVAL_GUARD_URL`` (or ``--url``), ``APPROVAL_GUARD_CREDENTIAL`` (only
from the environment: a command line is visible to other users),
``APPROVAL_GUARD_HARNESS_LIMIT``, ``APPROVAL_GUARD_REDACTION_KEY``,
``APPROVAL_GUARD_REQUESTED_BY``. Every option is checked before the child
starts (exit 2); an ``--editable`` or ``--redact`` that names a tool or an
argument the child does not list stops the proxy once its tool list is known
(exit 2, the child stopped).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping

from approval_guard._codec.hosts import is_loopback, listen_host
from approval_guard._env import (
    ENV_CREDENTIAL,
    ENV_URL,
    GuardSettings,
    default_guard_settings,
)
from approval_guard._options.spec import seconds_option
from approval_guard.cli._output import PROG, CliError, UsageError, say
from approval_guard.cli._signals import interrupt, on_sigterm
from approval_guard.exceptions import ConfigurationError

_SubParsers = argparse._SubParsersAction


def add_mcp_proxy_command(
    sub: _SubParsers[argparse.ArgumentParser], env: Mapping[str, str]
) -> None:
    """Add ``mcp-proxy`` to a command line's subcommands."""
    proxy = sub.add_parser(
        "mcp-proxy",
        help="run a stdio MCP server behind the guard (each matching tool call needs approval)",
        description="Start COMMAND as a stdio MCP server and relay MCP to it; each tools/call "
        "whose tool name matches --guard waits for a person's approval first.",
    )
    proxy.add_argument(
        "--guard",
        required=True,
        metavar="PATTERNS",
        help="tool-name globs, comma-separated, e.g. 'write_*,delete_*' ('*' guards every tool)",
    )
    proxy.add_argument(
        "--timeout",
        default="30m",
        metavar="DUR",
        help="the approval window to ask for (default: 30m; clamped to the harness limit)",
    )
    proxy.add_argument(
        "--editable",
        action="append",
        default=[],
        metavar="TOOL:ARG",
        help="an argument the reviewer may change when approving (repeatable)",
    )
    proxy.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="TOOL:PATH",
        help="an argument (or dotted path) the reviewer sees only as a keyed digest (repeatable)",
    )
    proxy.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve streamable HTTP on http://HOST:PORT/mcp instead of stdio",
    )
    proxy.add_argument(
        "--start-timeout",
        default="30s",
        metavar="DUR",
        help="how long the MCP server may take to answer initialize before the proxy stops "
        "it and exits (default: 30s)",
    )
    proxy.add_argument(
        "--url",
        default=env.get(ENV_URL),
        help=f"the provider (default: ${ENV_URL}); the credential is ${ENV_CREDENTIAL}",
    )
    proxy.add_argument(
        "--ledger",
        metavar="PATH",
        help="a SQLite execution record, so an approval runs at most once across restarts "
        "(default: in memory, for this process)",
    )
    proxy.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the MCP server to run (after --)",
    )
    proxy.set_defaults(func=cmd_mcp_proxy)


def _listen(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--listen takes HOST:PORT, like 127.0.0.1:8931, not {text!r}")
    if not is_loopback(host):
        # The HTTP endpoint has no authentication of its own: anyone who reaches it could
        # call the unguarded tools, so it is only ever offered to this machine.
        raise UsageError(
            f"--listen {text!r}: the proxy's HTTP endpoint has no authentication, so it listens "
            "only on a loopback address (127.0.0.1, ::1 or localhost)"
        )
    return listen_host(host), int(port)


def _settings(url: str | None) -> GuardSettings:
    environ = dict(os.environ)
    if url:
        environ[ENV_URL] = url
    try:
        return default_guard_settings(environ)
    except ConfigurationError:
        raise UsageError(
            f"mcp-proxy needs the provider: --url or ${ENV_URL}, and ${ENV_CREDENTIAL} in the "
            "environment"
        ) from None


def cmd_mcp_proxy(args: argparse.Namespace) -> int:
    """``mcp-proxy``: check everything, then run the child and serve until the client leaves."""
    from approval_guard._guard import Guard
    from approval_guard._ledger.sqlite import SQLiteLedger
    from approval_guard.mcp_proxy import ProxyRules, run_proxy

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("mcp-proxy needs the MCP server's command after --")
    try:
        rules = ProxyRules.parse(
            guard=args.guard, timeout=args.timeout, editable=args.editable, redact=args.redact
        )
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    listen = _listen(args.listen)
    try:
        start_timeout = seconds_option(args.start_timeout, "--start-timeout")
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    if not 0 < start_timeout <= 3600:
        raise UsageError(
            f"--start-timeout must be more than 0s and at most 1h, not {args.start_timeout!r}"
        )
    settings = _settings(args.url)
    try:
        import mcp  # noqa: F401 (only to say what to install, before anything starts)
    except ImportError:
        raise CliError("mcp-proxy needs the mcp extra: pip install 'approval-guard[mcp]'") from None
    try:
        ledger = None if args.ledger is None else SQLiteLedger(args.ledger)
        guard = Guard(
            base_url=settings.base_url,
            credential=settings.credential,
            harness_limit=settings.harness_limit,
            redaction_key=settings.redaction_key or None,
            requested_by=settings.requested_by or None,
            ledger=ledger,
        )
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # the ledger file cannot be opened
        raise CliError(f"cannot open the ledger {args.ledger}: {exc}") from None
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{PROG}: %(message)s")
    try:
        with on_sigterm(interrupt):
            run_proxy(command, guard=guard, rules=rules, listen=listen, start_timeout=start_timeout)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        pass
    finally:
        guard.close()
    say(f"{PROG}: mcp-proxy stopped", stream=sys.stderr)
    return 0
