"""``ReviewerClient``: the provider's API as the command uses it, over the library's one client."""

from __future__ import annotations

import urllib.parse
from typing import Any

import attrs

from approval_guard._codec import wire as _wire
from approval_guard._codec import wire_models as _models
from approval_guard._codec.clock import SystemClock
from approval_guard._codec.exact_json import MAX_JSON_DEPTH, load_json
from approval_guard._transport import sync_client as _client
from approval_guard.cli._output import PROG, CliError, safe

HTTP_TIMEOUT = 10.0

# An answer holds the arguments this many levels down at most: a list answer,
# its "requests" array, the request object.
_ENVELOPE_DEPTH = 3


@attrs.frozen
class Team:
    """API 1.1's team fields of a request: who asked, who approved so far, how many must."""

    requested_by: str | None = None
    approvals: tuple[str, ...] = ()
    approvals_required: int = 1

    @property
    def progress(self) -> str:
        """``"1 of 2 approvals: alice"``."""
        text = f"{len(self.approvals)} of {self.approvals_required} approvals"
        return text + (": " + ", ".join(self.approvals) if self.approvals else "")


def team_of(obj: object) -> Team:
    """The team fields of a request object (a field missing or malformed: its default)."""
    if not isinstance(obj, dict):
        return Team()
    requested_by = obj.get("requested_by")
    required = obj.get("approvals_required")
    approvals = obj.get("approvals")
    names = tuple(
        safe(str(item["by"]))
        for item in (approvals if isinstance(approvals, list) else ())
        if isinstance(item, dict) and isinstance(item.get("by"), str)
    )
    return Team(
        requested_by=safe(requested_by) if isinstance(requested_by, str) else None,
        approvals=names,
        approvals_required=(
            required if isinstance(required, int) and not isinstance(required, bool) else 1
        ),
    )


@attrs.frozen
class Reviewed:
    """A request as the provider answered it, with its team fields.

    API 1.3: ``batch`` (the agent's turn) and ``context`` (the agent's own
    stated reason), each None when the request has none.
    """

    request: _models.ApprovalRequest
    team: Team
    batch: str | None = None
    context: str | None = None
    #: API 1.3: the standing grant a decision gave (its JSON), if any.
    grant: dict[str, Any] | None = None


def reviewed(obj: Any, grant: object = None) -> Reviewed:
    """A request object as the provider answered it (a malformed 1.3 field: None)."""
    batch = obj.get("batch") if isinstance(obj, dict) else None
    context = obj.get("context") if isinstance(obj, dict) else None
    return Reviewed(
        _parse(obj),
        team_of(obj),
        batch=batch if isinstance(batch, str) else None,
        context=context if isinstance(context, str) else None,
        grant=grant if isinstance(grant, dict) else None,
    )


class ReviewerClient:
    """The provider's API as the CLI uses it; every failure becomes a :class:`CliError`.

    It sends through the library's one HTTP client,
    ``approval_guard._transport.sync_client.ProviderClient``
    (Bearer set as requests' auth so no ``.netrc`` replaces it, no environment
    proxy for plain http, bounded answers); ``credential`` never appears in a message.
    """

    def __init__(self, url: str, credential: str, *, timeout: float = HTTP_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._client = _client.ProviderClient(self.url, credential, clock=SystemClock())

    def __repr__(self) -> str:
        return f"ReviewerClient(url={self.url!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self._client.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        request_id: str | None = None,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        deciding: bool = False,
        none_if_unknown: bool = False,
    ) -> Any:
        """Send one call; return the decoded JSON or raise :class:`CliError`.

        ``deciding``: the call is a decision, whose refusals (403, 409
        ``already_approved``) say why this reviewer cannot make it.
        ``none_if_unknown``: a 404 (an older provider without this path) is None.
        """
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        try:
            answer = self._client.call(
                method, path, payload=body, timeout=self._timeout, decode=_exact_json
            )
        except _client.TransportError as exc:
            if exc.kind == "connection":
                problem = f"no provider is answering at {self.url}; start one with `{PROG} serve`"
            elif exc.kind == "timeout":
                problem = f"the provider at {self.url} did not answer within {self._timeout:g}s"
            else:
                problem = (
                    f"could not use the answer of the provider at {self.url}: {safe(exc.message)}"
                )
            raise CliError(problem) from None
        if answer.ok:
            return answer.body
        if none_if_unknown and answer.status == 404:
            return None
        raise self._error(answer.status, answer.body, request_id, deciding=deciding)

    def _error(
        self, status: int, data: Any, request_id: str | None, *, deciding: bool = False
    ) -> CliError:
        kind, message = _models.parse_error(data) or (f"http_{status}", "")
        if deciding and status == 403:
            why = safe(message) if message else "the provider refused it"
            return CliError(f"you may not decide this request: {why} (403 forbidden)")
        if deciding and kind == "already_approved":
            team = team_of(data.get("request") if isinstance(data, dict) else None)
            return CliError(
                f"you already approved {safe(request_id or '')}; it needs "
                f"{team.approvals_required} approvals ({team.progress}; 409 already_approved)"
            )
        if status == 401:
            return CliError(
                f"the provider at {self.url} refused the credential (401 unauthorized); "
                "check --token / --credential and the environment variables"
            )
        if status == 403:
            return CliError(
                f"the provider at {self.url} does not allow this credential to do that "
                f"(403 forbidden){': ' + safe(message) if message else ''}"
            )
        if status == 404 and request_id is not None:
            return CliError(f"no request with id {safe(request_id)} at {self.url} (404 not found)")
        if kind == "not_pending" and request_id is not None:
            current = data.get("request") if isinstance(data, dict) else None
            state = current.get("status") if isinstance(current, dict) else None
            now = f": it is {safe(str(state))}" if state else ""
            return CliError(f"request {safe(request_id)} is no longer pending{now}")
        detail = f": {safe(message)}" if message else ""
        return CliError(f"the provider answered {status} {safe(kind)}{detail}")

    # The calls themselves.

    def list_requests(self, status: str | None = None) -> list[_models.ApprovalRequest]:
        """Every request, newest first, optionally only those with ``status``."""
        return [one.request for one in self.list_reviewed(status)]

    def list_reviewed(self, status: str | None = None) -> list[Reviewed]:
        """Every request with its team fields, newest first, optionally only with ``status``.

        A list answer is one page (1,000 at most): the pages are followed through
        ``next_before`` to the last, so an old pending request is never left out.
        """
        out: list[Reviewed] = []
        seen: set[str] = set()
        before: str | None = None
        while True:
            params = {"status": status} if status else {}
            if before is not None:
                params["before"] = before
            data = self.call("GET", "/v1/requests", params=params or None)
            items = data.get("requests", data.get("items")) if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise CliError(f"the provider at {self.url} answered a list in an unknown shape")
            parsed = (reviewed(item) for item in items)
            fresh = [one for one in parsed if one.request.id not in seen]
            out.extend(fresh)
            seen.update(one.request.id for one in fresh)
            following = data.get("next_before") if isinstance(data, dict) else None
            # A page with nothing new ends it too: a provider's cursor cannot loop us.
            if not fresh or not isinstance(following, str):
                return out
            before = following

    def get(self, request_id: str) -> _models.ApprovalRequest:
        """One request."""
        return self.read(request_id).request

    def read(self, request_id: str) -> Reviewed:
        """One request with its team fields."""
        data = self.call("GET", f"/v1/requests/{_quote(request_id)}", request_id=request_id)
        return reviewed(data)

    def history(self, request_id: str) -> dict[str, Any]:
        """The request's audit trail: ``{"events": [...], "poll_count": N, ...}``."""
        data = self.call("GET", f"/v1/requests/{_quote(request_id)}/history", request_id=request_id)
        return data if isinstance(data, dict) else {}

    def decide(
        self,
        request_id: str,
        status: str,
        *,
        note: str | None,
        valid_for: str | None = None,
        arguments: dict[str, Any] | None = None,
        grant: dict[str, Any] | None = None,
    ) -> Reviewed:
        """Record a reviewer's decision (``arguments``: the whole object, edits applied).

        An approval of a request that needs several leaves it ``pending``
        until enough people approved: ``team`` says how far it has come.
        """
        body: dict[str, Any] = {"status": status, "note": note}
        if valid_for is not None:
            body["valid_for"] = valid_for
        if arguments is not None:
            body["arguments"] = arguments
        if grant is not None:
            body["grant"] = grant
        data = self.call(
            "POST",
            f"/v1/requests/{_quote(request_id)}/decision",
            request_id=request_id,
            body=body,
            deciding=True,
        )
        obj = data.get("request", data) if isinstance(data, dict) else data
        return reviewed(obj, data.get("grant") if isinstance(data, dict) else None)

    def decide_many(
        self, ids: list[str], status: str, *, note: str | None, valid_for: str | None = None
    ) -> list[dict[str, Any]]:
        """Decide each id as if alone (API 1.3, ``POST /v1/decisions``): a result per id, in order.

        A result is ``{"id", "status"}`` or ``{"id", "error": {"type", "message"}}``.
        A provider older than 1.3 (no such path) is asked once per id instead.
        """
        body: dict[str, Any] = {"ids": ids, "status": status, "note": note}
        if valid_for is not None:
            body["valid_for"] = valid_for
        data = self.call("POST", "/v1/decisions", body=body, deciding=True, none_if_unknown=True)
        if data is None:
            return [self._decide_alone(one, status, note, valid_for) for one in ids]
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list) or not all(isinstance(one, dict) for one in results):
            raise CliError(f"the provider at {self.url} answered the decisions in an unknown shape")
        return results

    def _decide_alone(
        self, request_id: str, status: str, note: str | None, valid_for: str | None
    ) -> dict[str, Any]:
        try:
            done = self.decide(request_id, status, note=note, valid_for=valid_for)
        except CliError as exc:
            return {"id": request_id, "error": {"type": "refused", "message": str(exc)}}
        return {"id": request_id, "status": done.request.status}

    def cancel(self, request_id: str, *, reason: str | None) -> _models.ApprovalRequest:
        """Withdraw a pending request (instance credential)."""
        body = {"reason": reason} if reason else None
        data = self.call(
            "POST", f"/v1/requests/{_quote(request_id)}/cancel", request_id=request_id, body=body
        )
        return _parse(data)


def _exact_json(raw: bytes) -> Any:
    """The provider's answer with every number as sent (``1e400`` is not ``inf``).

    Arguments may nest as deep as the provider accepts them (``MAX_JSON_DEPTH``);
    the answer around them adds a few levels, which must not make it unreadable.
    """
    return load_json(raw.decode("utf-8"), max_depth=MAX_JSON_DEPTH + _ENVELOPE_DEPTH)


def _quote(request_id: str) -> str:
    return urllib.parse.quote(request_id, safe="")


def _parse(obj: Any) -> _models.ApprovalRequest:
    try:
        return _models.parse_request(obj)
    except _wire.WireError as exc:
        raise CliError(f"the provider sent a request object this CLI cannot read: {exc}") from None
