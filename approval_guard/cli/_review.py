"""The reviewer's verbs: ``list``, ``show``, ``approve``, ``deny``, ``cancel``.

``approve`` and ``deny`` take one id (as always) or several: several are sent
as one ``POST /v1/decisions`` (API 1.3), each decided as if alone, one line
each in the order given.

Each handler takes the parsed arguments and returns an exit code; a failure is
a :class:`~approval_guard.cli._output.CliError`.
"""

from __future__ import annotations

import argparse
from contextlib import closing
from typing import Any

from approval_guard._codec import wire as _wire
from approval_guard._codec import wire_models as _models
from approval_guard._codec.display import pointer, redacted_paths
from approval_guard._codec.exact_json import dump_json, load_json
from approval_guard._env import ENV_CREDENTIAL, ENV_REVIEWER_TOKEN
from approval_guard.cli._grants import grant_body, grant_line, scope_words
from approval_guard.cli._output import (
    PROG,
    CliError,
    UsageError,
    compact_json,
    local_time,
    pretty_json,
    safe,
    say,
    time_left,
    usage_failed,
)
from approval_guard.cli._reviewer_client import Reviewed, ReviewerClient, Team

#: How the agent's stated reason (API 1.3's ``context``) is labelled: its own words.
AGENT_SAYS = "the agent says"


def _reviewer(args: argparse.Namespace) -> ReviewerClient:
    if not args.token:
        raise CliError(
            f"no reviewer token: pass --token or set {ENV_REVIEWER_TOKEN} "
            f"(`{PROG} serve` printed it on its first start)"
        )
    return ReviewerClient(args.url, args.token)


def _describe(request: _models.ApprovalRequest, team: Team | None = None) -> list[tuple[str, str]]:
    team = team or Team()
    rows = [
        ("request", request.id),
        ("tool", request.tool),
        ("status", request.status),
        ("created", local_time(request.created_at)),
        ("timeout", request.timeout),
    ]
    if team.requested_by is not None:
        rows.append(("requested by", team.requested_by))
    deadline = local_time(request.deadline_at)
    if request.is_pending:
        deadline += f" ({time_left(request.deadline_at)})"
    rows.append(("deadline", deadline))
    if team.approvals_required > 1:
        rows.append(("approvals", team.progress))
    if request.decision is not None:
        rows.append(("decided", local_time(request.decision.decided_at)))
        if request.decision.decided_by is not None:
            rows.append(("decided by", request.decision.decided_by))
        if request.decision.expires_at is not None:
            rows.append(("valid until", local_time(request.decision.expires_at)))
        rows.append(("note", request.decision.note if request.decision.note else "(none)"))
    if request.cancelled_at is not None:
        rows.append(("cancelled", local_time(request.cancelled_at)))
    return rows


def _when(request: _models.ApprovalRequest) -> str:
    """Time left for a pending request; when it closed for the others."""
    if request.is_pending:
        return time_left(request.deadline_at)
    closed = request.deadline_at  # expired: the deadline is when
    if request.decision is not None:
        closed = request.decision.decided_at
    elif request.cancelled_at is not None:
        closed = request.cancelled_at
    return closed.astimezone().strftime("%m-%d %H:%M:%S")


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: requests, newest first."""
    with closing(_reviewer(args)) as client:
        reviewed = client.list_reviewed(args.status)
    requests_ = [one.request for one in reviewed]
    if args.json:
        # Exact numbers as stored (a JSONNumber is no Python number), ASCII for the terminal.
        listed = [_team_json(_models.request_to_json(one.request), one) for one in reviewed]
        say(dump_json(listed, indent=2, ensure_ascii=True))
        return 0
    if not requests_:
        say(f"no {args.status} requests" if args.status else "no requests")
        return 0
    say(f"{'ID':<36}  {'STATUS':<9}  {'TOOL':<20}  {'WHEN':<16}  ARGUMENTS")
    for r in requests_:
        tool = safe(r.tool)
        tool = tool if len(tool) <= 20 else tool[:19] + "…"
        args_text = compact_json(r.arguments, width=60, redacted=r.redacted)
        say(f"{safe(r.id):<36}  {r.status:<9}  {tool:<20}  {_when(r):<16}  {args_text}")
    # The agent's stated reason under its row, cut to one line, hidden characters escaped.
    for one in reviewed:
        if one.context:
            said = compact_json(one.context, width=100)
            say(f"{'':<36}  {AGENT_SAYS}: {said}")
    return 0


def _team_json(out: dict[str, Any], one: Reviewed) -> dict[str, Any]:
    """A listed request's JSON with its team fields (who asked, who approved, how many must)."""
    team = one.team
    if team.requested_by is not None:
        out["requested_by"] = team.requested_by
    if team.approvals_required > 1:
        out["approved_by"] = list(team.approvals)
        out["approvals_required"] = team.approvals_required
    if one.batch is not None:
        out["batch"] = one.batch
    if one.context is not None:
        out["context"] = one.context
    return out


def _history_line(event: dict[str, Any]) -> str:
    """One audit event: ``  <local time>  <type>  by <name> (<kind>)  key=value ...``."""
    try:
        at = local_time(_wire.parse_timestamp(event.get("at"), field="at"))
    except _wire.WireError:
        at = safe(str(event.get("at", "")))
    parts = [f"  {at:<25}", f"{safe(str(event.get('type', 'event'))):<10}"]
    actor = event.get("actor")
    if isinstance(actor, dict) and actor.get("name"):
        parts.append(f"by {safe(str(actor['name']))} ({safe(str(actor.get('kind', '?')))})")
    detail = event.get("detail")
    if isinstance(detail, dict):
        parts.extend(
            f"{safe(str(k))}={compact_json(v, width=80)}"
            for k, v in detail.items()
            if v is not None
        )
    return "  ".join(parts).rstrip()


def cmd_show(args: argparse.Namespace) -> int:
    """``show ID``: one request with its arguments and audit trail."""
    with closing(_reviewer(args)) as client:
        reviewed = client.read(args.id)
        history = client.history(args.id)
    request = reviewed.request
    for label, value in _describe(request, reviewed.team):
        say(f"{label:<12} {safe(value)}")
    redacted = redacted_paths(request.arguments, request.redacted)
    if redacted:
        # As the page's notice: the reviewer sees a digest; the tool gets the real value.
        say(f"{'redacted':<12} {safe(', '.join(redacted))} (the tool gets the real values)")
    if reviewed.batch is not None:
        say(f"{'batch':<12} {safe(reviewed.batch)}")
    if reviewed.context:
        # Above the arguments, labelled as the agent's own words: nothing is decided from it.
        say(f"{AGENT_SAYS} (its own words, not checked):")
        for line in reviewed.context.split("\n"):
            say(f"  | {safe(line)}")
    say("arguments")
    say(pretty_json(request.arguments, indent="  ", redacted=request.redacted))
    events = [e for e in history.get("events", []) if isinstance(e, dict)]
    polls = history.get("poll_count")
    say("history" + (f" (polled {polls} times by the adapter)" if isinstance(polls, int) else ""))
    for event in events:
        say(_history_line(event))
    if not events:
        say("  (none)")
    return 0


def _decide_many(args: argparse.Namespace, status: str) -> int:
    """``approve|deny ID ID ...``: each id decided as if alone; one line each, in order.

    Exit code 0 when every id was decided, 1 when any was refused (each says why).
    """
    ids = list(args.ids)
    if len(set(ids)) != len(ids):
        return usage_failed(UsageError("an id is listed twice: list each request once"))
    if getattr(args, "edits", None):
        return usage_failed(UsageError("--set edits one request: give a single ID with it"))
    if any(
        getattr(args, option, None) not in (None, [])
        for option in ("grant_for", "grant_uses", "grant_match", "grant_requested_by")
    ):
        # A grant is given on one request (its scope is that request's): never dropped.
        return usage_failed(
            UsageError("--grant-* gives a grant on one request: give a single ID with it")
        )
    valid_for = args.valid_for if status == _wire.APPROVED else None
    with closing(_reviewer(args)) as client:
        results = client.decide_many(ids, status, note=args.note, valid_for=valid_for)
    refused = 0
    for result in results:
        request_id = safe(str(result.get("id", "")))
        error = result.get("error")
        if isinstance(error, dict):
            refused += 1
            kind = safe(str(error.get("type", "refused")))
            say(f"{request_id}: not decided: {safe(str(error.get('message', '')))} ({kind})")
        elif result.get("status") == _wire.PENDING:
            say(f"recorded your approval of {request_id}; it stays pending until more approve")
        else:
            say(f"{safe(str(result.get('status', '')))} {request_id}")
    if refused:
        raise CliError(f"{refused} of {len(results)} requests were not decided (see above)")
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    """``approve ID``: the call may start until the approval's ``expires_at``.

    Several ids: see :func:`_decide_many`.
    """
    if len(args.ids) > 1:
        return _decide_many(args, _wire.APPROVED)
    args.id = args.ids[0]
    with closing(_reviewer(args)) as client:
        try:
            arguments = _edited(client.get(args.id), args.edits) if args.edits else None
            grant = grant_body(args)
        except UsageError as exc:
            return usage_failed(exc)
        reviewed = client.decide(
            args.id,
            _wire.APPROVED,
            note=args.note,
            valid_for=args.valid_for,
            arguments=arguments,
            grant=grant,
        )
    request, team = reviewed.request, reviewed.team
    if reviewed.grant is not None:
        say(f"gave a standing grant: {grant_line(reviewed.grant)}")
        say(f"    {scope_words(reviewed.grant)}")
    if request.is_pending:
        # One approval of several: the request is not approved yet, and must not say so.
        more = max(1, team.approvals_required - len(team.approvals))
        who = "person approves" if more == 1 else "people approve"
        say(
            f"recorded your approval of {safe(request.id)} ({safe(request.tool)}): "
            f"{team.progress}; it stays pending until {more} more {who}"
        )
        return 0
    expires = request.decision.expires_at if request.decision else None
    until = f"; the call may start until {local_time(expires)}" if expires else ""
    by = ""
    if team.approvals_required > 1 and request.decision and request.decision.decided_by:
        by = f" by {safe(request.decision.decided_by)}"
    say(f"approved {safe(request.id)} ({safe(request.tool)}){by}{until}")
    return 0


def _edited(request: _models.ApprovalRequest, edits: list[str]) -> dict[str, Any]:
    """The request's whole arguments with each ``NAME=JSON`` applied (numbers kept exactly).

    The provider checks that only names the tool offered as editable changed.
    A redacted value cannot be changed: the reviewer never saw what the tool
    would get (:class:`UsageError`, exit code 2, and nothing is sent).
    """
    arguments = dict(request.arguments)
    for edit in edits:
        name, sep, text = edit.partition("=")
        if not sep or not name:
            raise CliError(f"--set takes NAME=JSON, e.g. amount=2500, not {safe(edit)!r}")
        if name not in arguments:
            raise CliError(f"{safe(request.tool)} has no argument {safe(name)!r} to change")
        hidden = redacted_paths(arguments[name], request.redacted, at=pointer((name,)))
        if hidden:
            what = "is redacted" if hidden == [""] else "holds a redacted value"
            raise UsageError(
                f"--set {safe(name)}: {safe(name)!r} {what} (you see only a digest of it), "
                "so it cannot be changed"
            )
        try:
            arguments[name] = load_json(text)
        except ValueError:
            raise CliError(
                f"--set {safe(name)}: {safe(text)!r} is not JSON (text goes in double quotes)"
            ) from None
    return arguments


def cmd_deny(args: argparse.Namespace) -> int:
    """``deny ID --note TEXT``: the call will not run; the note tells the agent why.

    Several ids: see :func:`_decide_many` (one note for all).
    """
    if not args.note.strip():
        raise CliError("--note must say why: the agent receives it as the reason")
    if len(args.ids) > 1:
        return _decide_many(args, _wire.DENIED)
    args.id = args.ids[0]
    with closing(_reviewer(args)) as client:
        request = client.decide(args.id, _wire.DENIED, note=args.note).request
    say(f"denied {safe(request.id)} ({safe(request.tool)})")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """``cancel ID``: withdraw a pending request, with the instance credential that made it."""
    if not args.credential:
        raise CliError(
            f"cancel needs the instance credential that created the request: pass --credential "
            f"or set {ENV_CREDENTIAL} (a reviewer token cannot cancel; deny it instead)"
        )
    with closing(ReviewerClient(args.url, args.credential)) as client:
        request = client.cancel(args.id, reason=args.reason)
    say(f"cancelled {safe(request.id)} ({safe(request.tool)})")
    return 0
