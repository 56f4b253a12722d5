"""``reviewers add|link|list|remove`` and ``audit``: the team on a provider's database.

They open the store directly (``--db PATH`` or ``--dsn DSN``), not over HTTP:
adding a person is an operator's act on the database, as ``serve`` is. A new
reviewer's token is printed once, as the last word of the output, and kept
only as a sha256; ``list`` never shows one (none is stored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from approval_guard._codec.duration import parse_age
from approval_guard._codec.wire import format_timestamp
from approval_guard.cli._links import add_identity_arguments
from approval_guard.cli._output import CliError, UsageError, safe, say

if TYPE_CHECKING:
    from approval_guard.provider import StoreProtocol


@contextlib.contextmanager
def _store(args: argparse.Namespace) -> Iterator[StoreProtocol]:
    from approval_guard.cli._serve import safe_dsn_error
    from approval_guard.provider.store.opening import open_store

    try:
        store = open_store(db=args.db, dsn=args.dsn)
    except ImportError as exc:
        raise CliError(
            f"--dsn needs the postgres extra: pip install 'approval-guard[postgres]' ({exc})"
        ) from None
    except Exception as exc:
        where = "the PostgreSQL database" if args.dsn else f"the database {args.db}"
        raise CliError(f"cannot open {where}: {safe_dsn_error(exc, args.dsn or '')}") from None
    try:
        yield store
    finally:
        store.close()


def cmd_reviewers_add(args: argparse.Namespace) -> int:
    """``reviewers add NAME [--role R ...] [--email A] [--channel KIND:ID]...``: token last."""
    from approval_guard.cli._links import identities_from_args
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    links = identities_from_args(args)
    with _store(args) as store:
        try:
            # The identities are checked free first: a refused one makes no reviewer.
            for kind, identity in links.items():
                taken = store.reviewer_by_identity(kind, identity)
                if taken is not None:
                    raise ReviewerNameError(
                        f"{identity} on {kind} is already linked to another live reviewer, "
                        f"{taken.name!r}"
                    )
            token = store.add_reviewer(args.name, roles=args.roles or ())
        except ReviewerNameError as exc:
            raise CliError(str(exc)) from None
        linked = {}
        if links:
            try:
                store.link_identities(args.name, links)
                linked = links
            except ReviewerNameError as exc:  # taken since the check: the token must still show
                say(f"warning: {exc}; add it with reviewers link", stream=sys.stderr)
    roles = ", ".join(args.roles) if args.roles else "no roles"
    if "email" in linked:
        roles += f"; {linked['email']}"
    slack = f", Slack user {safe(linked['slack'])}" if "slack" in linked else ""
    others = "".join(
        f", {kind} {safe(identity)}"
        for kind, identity in linked.items()
        if kind not in ("email", "slack")
    )
    say(f"added reviewer {safe(args.name)} ({safe(roles)}{slack}{others}).")
    say("Their token is shown once and stored only as a hash:")
    say(token)
    return 0


def cmd_reviewers_link(args: argparse.Namespace) -> int:
    """``reviewers link NAME [--slack-user U...] [--email ADDRESS] [--channel KIND:ID]...``."""
    from approval_guard.cli._links import identities_from_args
    from approval_guard.provider.channels.registry import identities
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    links = identities_from_args(args)
    if not links:
        flags = " or ".join(one.flag for one in identities().values())
        raise UsageError(f"reviewers link needs {flags}, or --channel KIND:ID")
    with _store(args) as store:
        try:
            store.link_identities(args.name, links)  # all or nothing
        except ReviewerNameError as exc:
            raise CliError(str(exc)) from None
    for kind, identity in links.items():
        if kind == "slack":
            say(f"linked reviewer {safe(args.name)} to the Slack user {safe(identity)}")
        elif kind == "email":
            say(f"linked reviewer {safe(args.name)} to {identity}: new requests' mail goes there")
        else:
            say(f"linked reviewer {safe(args.name)} to {safe(identity)} on {kind}")
    return 0


def cmd_reviewers_list(args: argparse.Namespace) -> int:
    """``reviewers list``: name, roles, email, created (JSON: every link); never a token."""
    from approval_guard.provider.channels.registry import identities

    kinds = list(identities())
    with _store(args) as store:
        reviewers = store.list_reviewers()
        emails = store.identities("email")
        links = {kind: store.identities(kind) for kind in kinds}
    if args.json:
        say(
            json.dumps(
                [
                    {
                        "name": one.name,
                        "roles": list(one.roles),
                        "email": emails.get(one.id),
                        "links": {
                            kind: found[one.id] for kind, found in links.items() if one.id in found
                        },
                        "created_at": format_timestamp(one.created_at),
                    }
                    for one in reviewers
                ]
            )
        )
        return 0
    if not reviewers:
        say("no reviewers")
        return 0
    width = max(len(one.name) for one in reviewers)
    for one in reviewers:
        roles = ",".join(one.roles) or "-"
        email = emails.get(one.id, "-")
        say(
            f"{safe(one.name).ljust(width)}  {safe(roles)}  {email}  "
            f"{format_timestamp(one.created_at)}"
        )
    return 0


def cmd_reviewers_remove(args: argparse.Namespace) -> int:
    """``reviewers remove NAME``: revoke; their page sessions end at once."""
    with _store(args) as store:
        removed = store.remove_reviewer(args.name)
    if not removed:
        raise CliError(f"no live reviewer is named {args.name!r}")
    say(f"removed reviewer {safe(args.name)}: their token no longer works and their sessions ended")
    return 0


def cmd_agents_add(args: argparse.Namespace) -> int:
    """``agents add NAME``: a named instance credential; its token is printed once."""
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    with _store(args) as store:
        try:
            token = store.add_agent(args.name)
        except ReviewerNameError as exc:
            raise CliError(str(exc).replace("reviewer name", "agent name")) from None
    say(f"added agent {safe(args.name)}.")
    say("Its token (the guard's credential) is shown once and stored only as a hash:")
    say(token)
    return 0


def cmd_agents_list(args: argparse.Namespace) -> int:
    """``agents list``: the live agents (instance credentials) by name; never a token."""
    with _store(args) as store:
        agents = store.list_agents()
    if args.json:
        say(
            json.dumps(
                [
                    {"name": one.name, "created_at": format_timestamp(one.created_at)}
                    for one in agents
                ]
            )
        )
        return 0
    if not agents:
        say("no agents")
        return 0
    width = max(len(one.name) for one in agents)
    for one in agents:
        say(f"{safe(one.name).ljust(width)}  {format_timestamp(one.created_at)}")
    return 0


def cmd_agents_remove(args: argparse.Namespace) -> int:
    """``agents remove NAME``: revoke; its calls are refused and its grants end at once."""
    with _store(args) as store:
        removed = store.remove_agent(args.name)
    if not removed:
        raise CliError(f"no live agent is named {args.name!r}")
    say(f"removed agent {safe(args.name)}: its token no longer works and its grants ended")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """``audit [--since 1h] [--json]``: the audit trail, oldest first."""
    from approval_guard.provider.http.render import audit_json

    with _store(args) as store:
        since = None if args.since is None else store.now() - args.since
        rows = store.audit(since=since)
    if args.json:
        say(json.dumps(audit_json(rows)))
        return 0
    for row in rows:
        detail = json.dumps(row.detail, sort_keys=True) if row.detail else ""
        say(
            safe(
                f"{format_timestamp(row.at)}  {row.actor}  {row.source}  {row.action}  "
                f"{row.request_id or '-'}  {detail}"
            ).rstrip()
        )
    return 0


def _age(text: str) -> object:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_team_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reviewers``, ``agents`` and ``audit`` to a command line's subcommands."""
    where = argparse.ArgumentParser(add_help=False)
    store = where.add_mutually_exclusive_group(required=True)
    store.add_argument("--db", metavar="PATH", help="the provider's SQLite file")
    store.add_argument(
        "--dsn", help="the provider's PostgreSQL DSN (leave the password to PGPASSWORD)"
    )

    reviewers = sub.add_parser("reviewers", help="named reviewers: add, link, list, remove")
    verbs = reviewers.add_subparsers(dest="reviewers_command", metavar="ACTION", required=True)
    add = verbs.add_parser("add", parents=[where], help="add a reviewer; prints their token once")
    add.add_argument("name", help="the person's name (1 to 64 printable characters, unique)")
    add.add_argument(
        "--role",
        action="append",
        default=[],
        dest="roles",
        metavar="ROLE",
        help="a role a rules file's approvers may name (repeatable)",
    )
    add_identity_arguments(add)
    add.set_defaults(func=cmd_reviewers_add)
    link = verbs.add_parser(
        "link", parents=[where], help="link a reviewer to their identity on a channel"
    )
    link.add_argument("name", help="the live reviewer's name")
    add_identity_arguments(link)
    link.set_defaults(func=cmd_reviewers_link)
    list_ = verbs.add_parser("list", parents=[where], help="the live reviewers (never a token)")
    list_.add_argument("--json", action="store_true", help="print them as JSON")
    list_.set_defaults(func=cmd_reviewers_list)
    remove = verbs.add_parser(
        "remove", parents=[where], help="revoke a reviewer; their sessions end at once"
    )
    remove.add_argument("name")
    remove.set_defaults(func=cmd_reviewers_remove)

    agents = sub.add_parser("agents", help="named agents (instance credentials): add, list, remove")
    agent_verbs = agents.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    add_agent = agent_verbs.add_parser(
        "add", parents=[where], help="add an agent; prints its token once"
    )
    add_agent.add_argument("name", help="the agent's name (1 to 64 printable characters, unique)")
    add_agent.set_defaults(func=cmd_agents_add)
    list_agents = agent_verbs.add_parser(
        "list", parents=[where], help="the live agents (never a token)"
    )
    list_agents.add_argument("--json", action="store_true", help="print them as JSON")
    list_agents.set_defaults(func=cmd_agents_list)
    remove_agent = agent_verbs.add_parser(
        "remove", parents=[where], help="revoke an agent; its grants end at once"
    )
    remove_agent.add_argument("name")
    remove_agent.set_defaults(func=cmd_agents_remove)

    audit = sub.add_parser("audit", parents=[where], help="the audit trail, oldest first")
    audit.add_argument(
        "--since", type=_age, metavar="AGE", help="only rows this recent: 1h, 30m, 2d"
    )
    audit.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    audit.set_defaults(func=cmd_audit)
