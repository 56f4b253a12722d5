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


def _email(args: argparse.Namespace) -> str | None:
    """``--email ADDRESS`` checked (a usage error, exit 2, for a bad one), or None."""
    if getattr(args, "email", None) is None:
        return None
    from approval_guard.provider.channels.email.addresses import AddressError, check_address

    try:
        return check_address(args.email)
    except AddressError as exc:
        raise UsageError(f"--email: {exc}") from None


def cmd_reviewers_add(args: argparse.Namespace) -> int:
    """``reviewers add NAME [--role R ...] [--slack-user U...] [--email ADDRESS]``: token last."""
    from approval_guard.provider.store.sql.credentials import ReviewerNameError
    from approval_guard.provider.store.sql.slack import check_slack_user

    slack_user = getattr(args, "slack_user", None)
    email = _email(args)
    with _store(args) as store:
        if email is not None and email in store.reviewer_emails().values():
            raise CliError(f"another live reviewer has the address {email}")
        try:
            if slack_user is not None:
                check_slack_user(slack_user)
                _check_slack_user_free(store, slack_user)
            token = store.add_reviewer(args.name, roles=args.roles or ())
            if slack_user is not None:
                store.link_slack_user(args.name, slack_user)
        except ReviewerNameError as exc:
            raise CliError(str(exc)) from None
        linked = None
        if email is not None:
            try:
                store.set_reviewer_email(args.name, email)
                linked = email
            except ReviewerNameError as exc:  # taken since the check: the token must still show
                say(f"warning: {exc}; add it with reviewers link", stream=sys.stderr)
    roles = ", ".join(args.roles) if args.roles else "no roles"
    if linked is not None:
        roles += f"; {linked}"
    slack = f", Slack user {safe(slack_user)}" if slack_user else ""
    say(f"added reviewer {safe(args.name)} ({safe(roles)}{slack}).")
    say("Their token is shown once and stored only as a hash:")
    say(token)
    return 0


def _check_slack_user_free(store: StoreProtocol, slack_user: str, name: str | None = None) -> None:
    from approval_guard.provider.store.sql.credentials import ReviewerNameError

    taken = store.slack_reviewer(slack_user)
    if taken is not None and taken.name != name:
        raise ReviewerNameError(
            f"the Slack user {slack_user} is already linked to the reviewer {taken.name!r}"
        )


def cmd_reviewers_link(args: argparse.Namespace) -> int:
    """``reviewers link NAME [--slack-user U...] [--email ADDRESS]``: where they decide from."""
    from approval_guard.provider.store.sql.credentials import ReviewerNameError
    from approval_guard.provider.store.sql.slack import check_slack_user

    slack_user = getattr(args, "slack_user", None)
    email = _email(args)
    if slack_user is None and email is None:
        raise UsageError("reviewers link needs --slack-user U... or --email ADDRESS (or both)")
    with _store(args) as store:
        try:
            # Everything that can refuse is checked before anything is changed.
            if slack_user is not None:
                check_slack_user(slack_user)
                _check_slack_user_free(store, slack_user, args.name)
            if email is not None and not store.set_reviewer_email(args.name, email):
                raise CliError(f"no live reviewer is named {args.name!r}")
            if slack_user is not None:
                store.link_slack_user(args.name, slack_user)
        except ReviewerNameError as exc:
            raise CliError(str(exc)) from None
    if slack_user is not None:
        say(f"linked reviewer {safe(args.name)} to the Slack user {safe(slack_user)}")
    if email is not None:
        say(f"linked reviewer {safe(args.name)} to {email}: new requests' mail goes there")
    return 0


def cmd_reviewers_list(args: argparse.Namespace) -> int:
    """``reviewers list``: name, roles, email, created; never a token."""
    with _store(args) as store:
        reviewers = store.list_reviewers()
        emails = store.reviewer_emails()
    if args.json:
        say(
            json.dumps(
                [
                    {
                        "name": one.name,
                        "roles": list(one.roles),
                        "email": emails.get(one.id),
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
    add.add_argument(
        "--slack-user",
        metavar="U...",
        help="their Slack user id: their clicks in Slack decide as them",
    )
    add.add_argument("--email", metavar="ADDRESS", help="where their approval mail goes")
    add.set_defaults(func=cmd_reviewers_add)
    link = verbs.add_parser(
        "link", parents=[where], help="link a reviewer to their Slack user id or email address"
    )
    link.add_argument("name", help="the live reviewer's name")
    link.add_argument("--slack-user", metavar="U...", help="their Slack user id (U0123ABC)")
    link.add_argument("--email", metavar="ADDRESS", help="their address for approval mail")
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
