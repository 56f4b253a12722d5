"""``approval-guard grants list|show|revoke|approve`` and ``approve --grant-*``: standing grants.

``--grant-match NAME=CONSTRAINT`` (repeatable) says how far a grant reaches for
one argument; every argument it does not name must be the same as this request's:

==========================  =================================================
``amount=same``             exactly this request's value (the default)
``amount=any``              any value
``amount=1..5000``          a number from 1 to 5000 inclusive (``..5000``,
                            ``1..``: one bound); written as integers, only
                            whole JSON numbers are covered
``currency=in:["GBP","EUR"]``  one of these JSON values
``payment_id=prefix:pay_``  a string starting with exactly these characters
``amount={"max": 10.5}``    any constraint as the API's JSON
==========================  =================================================
"""

from __future__ import annotations

import argparse
import json
from contextlib import closing
from datetime import timezone
from typing import Any

from approval_guard._codec.exact_json import dump_json, load_json
from approval_guard._codec.wire import parse_timestamp
from approval_guard.cli._output import CliError, UsageError, safe, say
from approval_guard.cli._reviewer_client import ReviewerClient, _quote


def grant_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """The decision's ``grant`` object from ``--grant-for/--grant-uses/--grant-match``."""
    wanted = args.grant_for is not None
    if not wanted:
        if args.grant_uses is not None or args.grant_match or args.grant_requested_by:
            raise UsageError(
                "--grant-uses, --grant-match and --grant-requested-by need --grant-for"
            )
        return None
    body: dict[str, Any] = {"for": args.grant_for}
    if args.grant_uses is not None:
        if args.grant_uses < 1:
            raise UsageError("--grant-uses must be at least 1")
        body["uses"] = args.grant_uses
    match: dict[str, Any] = {}
    for item in args.grant_match:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--grant-match takes NAME=CONSTRAINT, not {safe(item)!r}")
        if name in match:
            raise UsageError(f"--grant-match names {safe(name)!r} twice")
        match[name] = parse_constraint(name, text)
    if match:
        body["match"] = match
    if args.grant_requested_by:
        body["requested_by"] = args.grant_requested_by
    return body


def parse_constraint(name: str, text: str) -> Any:
    """One ``--grant-match`` constraint's text as the API's JSON (numbers kept exactly)."""
    try:
        if text in ("same", "any"):
            return text
        if text.startswith("in:"):
            values = load_json(text[3:])
            if not isinstance(values, list):
                raise ValueError
            return {"in": values}
        if text.startswith("prefix:"):
            return {"prefix": text[len("prefix:") :]}
        if text.startswith("{"):
            return load_json(text)
        low, sep, high = text.partition("..")
        if sep and (low or high):
            bounds = {}
            if low:
                bounds["min"] = load_json(low)
            if high:
                bounds["max"] = load_json(high)
            return bounds
    except ValueError:
        pass
    raise UsageError(
        f"--grant-match {safe(name)}: {safe(text)!r} is not a constraint "
        "(same, any, LOW..HIGH, in:[JSON,...], prefix:TEXT or a JSON object)"
    )


def scope_words(grant: dict[str, Any]) -> str:
    """A grant's scope in words, for a person."""
    parts = []
    for name, constraint in sorted((grant.get("match") or {}).items()):
        if constraint == "same":
            parts.append(f"{name} the same")
        elif constraint == "any":
            parts.append(f"{name} any")
        elif isinstance(constraint, dict) and "in" in constraint:
            parts.append(f"{name} one of {dump_json(constraint['in'])}")
        elif isinstance(constraint, dict) and "prefix" in constraint:
            parts.append(f"{name} starting {dump_json(constraint['prefix'])}")
        elif isinstance(constraint, dict):
            low = dump_json(constraint["min"]) if "min" in constraint else ""
            high = dump_json(constraint["max"]) if "max" in constraint else ""
            parts.append(f"{name} {low}..{high}")
    who = "anyone's calls" if grant.get("requested_by") == "any" else "the same person's calls"
    return safe(", ".join(parts) + f"; {who}")


def grant_line(grant: dict[str, Any]) -> str:
    """One line about a grant: id, status, tool, who, uses left, until."""
    uses = grant.get("uses_left")
    left = "unlimited uses" if uses is None else f"{uses} uses left"
    verb = "allows" if grant.get("decision") == "approved" else "denies"
    until = grant.get("expires_at")
    try:
        until = (
            parse_timestamp(until, field="expires_at")
            .astimezone(timezone.utc)
            .strftime("%Y-%m-%d %H:%M:%SZ")
        )
    except Exception:
        until = "?"
    return safe(
        f"{grant.get('id')}  {grant.get('status')}  {verb} {grant.get('tool')} for agent "
        f"{grant.get('agent')}, by {', '.join(grant.get('granted_by') or [])}; {left}; "
        f"until {until}"
    )


def _client(args: argparse.Namespace) -> ReviewerClient:
    if not args.token:
        raise CliError(
            "grants need a reviewer credential: pass --token or set APPROVAL_GUARD_REVIEWER_TOKEN"
        )
    return ReviewerClient(args.url, args.token)


def cmd_grants_list(args: argparse.Namespace) -> int:
    """``grants list [--all] [--json]``: live and pending grants (``--all``: ended ones too)."""
    with closing(_client(args)) as client:
        data = client.call("GET", "/v1/grants", params={"all": "1"} if args.all else None)
    grants = data.get("grants", []) if isinstance(data, dict) else []
    if args.json:
        say(json.dumps(grants))
        return 0
    if not grants:
        say("no standing grants")
    for grant in grants:
        say(grant_line(grant))
        say(f"    {scope_words(grant)}")
    return 0


def cmd_grants_show(args: argparse.Namespace) -> int:
    """``grants show ID``: one grant, its scope in words, and the pending requests it covers."""
    with closing(_client(args)) as client:
        grant = client.call("GET", f"/v1/grants/{_quote(args.id)}")
    if args.json:
        say(json.dumps(grant))
        return 0
    say(grant_line(grant))
    say(f"    {scope_words(grant)}")
    say(f"    from request {safe(str(grant.get('from_request')))}")
    covers = grant.get("covers_pending") or []
    if covers:
        say(f"    also covers {len(covers)} pending request(s): {safe(' '.join(covers))}")
    return 0


def cmd_grants_revoke(args: argparse.Namespace) -> int:
    """``grants revoke ID [--note TEXT]``: every create after this is asked of a person."""
    with closing(_client(args)) as client:
        grant = client.call(
            "POST", f"/v1/grants/{_quote(args.id)}/revoke", body={"note": args.note}, deciding=True
        )
    say(f"revoked: {grant_line(grant)}")
    return 0


def cmd_grants_approve(args: argparse.Namespace) -> int:
    """``grants approve ID``: one more approval of a grant that needs several."""
    with closing(_client(args)) as client:
        grant = client.call("POST", f"/v1/grants/{_quote(args.id)}/approve", body={}, deciding=True)
    say(f"approved: {grant_line(grant)}")
    return 0


def add_grant_options(approve: argparse.ArgumentParser, duration: Any) -> None:
    """``approve``'s ``--grant-for/--grant-uses/--grant-match/--grant-requested-by``."""
    approve.add_argument(
        "--grant-for",
        type=duration,
        metavar="DURATION",
        help="also allow calls like this one for this long (a standing grant), e.g. 1h",
    )
    approve.add_argument("--grant-uses", type=int, metavar="N", help="... for at most N calls")
    approve.add_argument(
        "--grant-match",
        action="append",
        default=[],
        metavar="NAME=CONSTRAINT",
        help="how far the grant reaches for one argument (repeatable): same, any, 1..5000, "
        'in:["GBP","EUR"], prefix:pay_ (unnamed arguments must be the same)',
    )
    approve.add_argument(
        "--grant-requested-by",
        choices=("same", "any"),
        help="cover calls made for the same person (default) or anyone",
    )


def add_grants_commands(sub: Any, reviewer: argparse.ArgumentParser) -> None:
    """``grants list|show|revoke|approve`` (a reviewer credential, over the API)."""
    grants = sub.add_parser("grants", help="standing grants: list, show, revoke, approve")
    verbs = grants.add_subparsers(dest="grants_command", metavar="ACTION", required=True)
    list_ = verbs.add_parser("list", parents=[reviewer], help="live and pending grants")
    list_.add_argument("--all", action="store_true", help="ended ones too")
    list_.add_argument("--json", action="store_true", help="print them as JSON")
    list_.set_defaults(func=cmd_grants_list)
    show = verbs.add_parser("show", parents=[reviewer], help="one grant")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    show.set_defaults(func=cmd_grants_show)
    revoke = verbs.add_parser("revoke", parents=[reviewer], help="end a grant now")
    revoke.add_argument("id")
    revoke.add_argument("--note", help="why (kept in the audit trail)")
    revoke.set_defaults(func=cmd_grants_revoke)
    approve = verbs.add_parser(
        "approve", parents=[reviewer], help="approve a grant that needs several people"
    )
    approve.add_argument("id")
    approve.set_defaults(func=cmd_grants_approve)
