"""API 1.3's create fields, the guard's side: ``batch`` and ``context`` sent only when given.

Real HTTP on 127.0.0.1 to a provider that answers as the test says
(``tests/support/hostile.py``): a 1.3 one echoes both fields; one made with
``known=FIELDS_1_2`` refuses any field it does not know with 400, as a 1.2
provider's create does (``provider/http/api.py``). The real local provider
checks that a call without them is exactly the create it always was.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import approval_guard as ag
from approval_guard._call.plan import CUT_MARK
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard
from tests.support.hostile import FIELDS_1_2, HostileProvider, approved, hostile_guard
from tests.support.tools import MODES, define, run

Hostile = Callable[..., HostileProvider]


def _refund(guard: ag.Guard, mode: str, ran: list[Any], **options: Any) -> Callable[..., Any]:
    def issue_refund(payment_id: str, amount: int) -> str:
        ran.append((payment_id, amount))
        return "refunded"

    return define(guard, mode, issue_refund, timeout="10m", **options)


def _call(tool: Callable[..., Any], **harness: Any) -> Any:
    """One call of ``tool`` inside ``harness_call(**harness)`` (sync or async alike)."""

    async def inside_async() -> Any:
        with ag.harness_call(**harness):
            return await tool("p_1", 4900)

    with ag.harness_call(**harness):
        out = tool("p_1", 4900)
    if asyncio.iscoroutine(out):
        out.close()
        return asyncio.run(inside_async())
    return out


@pytest.mark.parametrize("mode", MODES)
def test_a_call_without_batch_or_reason_sends_the_1_2_body_and_runs_on_a_1_2_provider(
    hostile: Hostile, mode: str
) -> None:
    """No new field, the bytes of before: a provider refusing unknown fields approves, it runs."""
    p = hostile(known=FIELDS_1_2, create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), mode, ran), "p_1", 4900)
    assert "refunded" == out
    assert [("p_1", 4900)] == ran
    assert [
        b'{"arguments":{"amount":4900,"payment_id":"p_1"},"timeout":"18s","tool":"issue_refund"}'
    ] == p.raw_bodies


def test_a_call_without_batch_or_reason_runs_on_the_real_provider(provider: LocalProvider) -> None:
    """The local provider, which refuses unknown create fields, takes the unchanged create."""
    provider.policy = approve_after(0)
    ran: list[Any] = []
    assert "refunded" == run(_refund(make_guard(provider), "sync", ran), "p_1", 4900)
    (request,) = provider.requests()
    assert {"payment_id": "p_1", "amount": 4900} == request.arguments


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("harness", "unknown"),
    [
        ({"batch": "turn-17"}, "batch"),
        ({"reason": "The customer was charged twice."}, "context"),
        ({"batch": "turn-17", "reason": "Charged twice."}, "batch, context"),
    ],
)
def test_batch_or_reason_on_a_1_2_provider_is_an_honest_not_run(
    hostile: Hostile, mode: str, harness: dict[str, str], unknown: str
) -> None:
    """The 1.2 provider's 400 is NOT_OBTAINED naming the field, and the tool never runs."""
    p = hostile(known=FIELDS_1_2, create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    out = _call(_refund(hostile_guard(p), mode, ran), **harness)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert f"unknown field(s): {unknown}" in out.message
    assert "issue_refund did not run (the provider may be older than API 1.3" in out.message
    assert [] == ran
    assert ["create"] == p.seen  # refused, not retried, nothing polled


@pytest.mark.parametrize("mode", MODES)
def test_batch_and_reason_are_sent_echoed_and_the_approved_call_runs_after_one_round_trip(
    hostile: Hostile, mode: str
) -> None:
    """Both fields go in the canonical body, the echo matches, and the tool runs."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    out = _call(
        _refund(hostile_guard(p), mode, ran), batch="turn-17", reason="Charged twice: refund one."
    )
    assert "refunded" == out
    assert [("p_1", 4900)] == ran
    assert ["create"] == p.seen
    (raw,) = p.raw_bodies
    assert raw == (
        b'{"arguments":{"amount":4900,"payment_id":"p_1"},"batch":"turn-17",'
        b'"context":"Charged twice: refund one.","timeout":"18s","tool":"issue_refund"}'
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field", ["batch", "context"])
@pytest.mark.parametrize("echo", ["someone else's", None, 17])
def test_an_echo_of_another_batch_or_context_does_not_run(
    hostile: Hostile, mode: str, field: str, echo: object
) -> None:
    """An approval echoing another value (or a non-string) is another request: not run."""
    p = hostile(create=lambda r, _: (201, approved({**r, field: echo})))
    ran: list[Any] = []
    out = _call(_refund(hostile_guard(p), mode, ran), batch="turn-17", reason="Charged twice.")
    if echo is None:  # not echoed at all: as an older provider, no mismatch
        assert "refunded" == out
        return
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert [] == ran
    if isinstance(echo, str):
        assert f"a different {field}" in out.message
    else:
        assert f"'{field}' is not a string" in out.message


@pytest.mark.parametrize("mode", MODES)
def test_an_echo_of_a_batch_the_call_never_sent_does_not_run(hostile: Hostile, mode: str) -> None:
    """A call without a batch, answered for a request in a batch: not this call."""
    p = hostile(create=lambda r, _: (201, approved({**r, "batch": "turn-9"})))
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), mode, ran), "p_1", 4900)
    assert isinstance(out, ag.NotRun)
    assert "a different batch" in out.message
    assert [] == ran


@pytest.mark.parametrize("field", ["batch", "context"])
def test_a_reused_key_first_used_with_another_batch_or_context_is_not_adopted(
    hostile: Hostile, field: str
) -> None:
    """A 422 whose original request has another batch or context is not this call's."""

    def reused(r: dict[str, Any], _: str) -> tuple[int, Any]:
        error = {"type": "idempotency_key_reused", "message": "different body"}
        return 422, {"error": error, "request": approved({**r, field: "another"})}

    p = hostile(create=reused)
    ran: list[Any] = []
    out = _call(_refund(hostile_guard(p), "sync", ran), batch="turn-17", reason="Charged twice.")
    assert isinstance(out, ag.NotRun)
    assert "batch or context" in out.message
    assert [] == ran


def test_the_same_call_with_another_reason_is_another_body() -> None:
    """Both fields are in the idempotent body: a replay with another reason is refused (422)."""
    guard = ag.Guard(base_url="http://127.0.0.1:1", credential="x", allow_insecure_http=True)

    @guard.requires_approval
    def issue_refund(payment_id: str, amount: int) -> str:
        return "refunded"

    spec = issue_refund.__approval_guard__  # type: ignore[attr-defined]
    bodies = []
    harnesses: list[dict[str, Any]] = [
        {},
        {"reason": "one"},
        {"reason": "two"},
        {"batch": "a"},
        {"batch": "b"},
    ]
    for harness in harnesses:
        with ag.harness_call(idempotency_key="k-1", **harness):
            plan, _ = guard._plan(spec, ("p", 1), {}, spec.bind(("p", 1), {}))
        assert not isinstance(plan, ag.NotRun)
        bodies.append(plan.body)
        assert json.loads(plan.body).get("context") == harness.get("reason")
        assert json.loads(plan.body).get("batch") == harness.get("batch")
    assert len(set(bodies)) == len(bodies)


@pytest.mark.parametrize("length", [999, 1000, 1001, 5000])
def test_a_reason_longer_than_1000_characters_is_cut_to_fit_with_a_marker(
    hostile: Hostile, length: int
) -> None:
    """At most 1,000 characters are sent; a longer reason ends with the cut marker."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    reason = "é" * length
    assert "refunded" == _call(_refund(hostile_guard(p), "sync", []), reason=reason)
    sent = p.bodies[0]["context"]
    if length <= 1000:
        assert reason == sent
    else:
        assert 1000 == len(sent)
        assert sent.endswith(CUT_MARK)
        assert reason[: 1000 - len(CUT_MARK)] == sent[: -len(CUT_MARK)]


@pytest.mark.parametrize(
    "harness",
    [
        {"batch": ""},
        {"batch": " turn"},
        {"batch": "turn\u200b17"},
        {"batch": "t" * 201},
        {"batch": 17},
        {"reason": ""},
        {"reason": "   "},
        {"reason": "\ud800"},
        {"reason": b"bytes"},
    ],
)
def test_a_bad_batch_or_reason_raises_at_harness_call(harness: dict[str, Any]) -> None:
    """A bad value is a ConfigurationError when the block is entered, naming the option."""
    with (
        pytest.raises(ag.ConfigurationError, match=next(iter(harness))),
        ag.harness_call(**harness),
    ):
        pass


# --------------------------------------------------------------------------- describe=


def _said(arguments: Mapping[str, Any]) -> str:
    return f"Refund {arguments['amount']} of payment {arguments['payment_id']}."


@pytest.mark.parametrize("mode", MODES)
def test_describe_sends_its_sentence_as_the_context(hostile: Hostile, mode: str) -> None:
    """The tool's sentence, made from the arguments as sent, goes as ``context``."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), mode, ran, describe=_said), "p_1", 4900)
    assert "refunded" == out
    assert "Refund 4900 of payment p_1." == p.bodies[0]["context"]


def test_an_async_tool_may_have_an_async_describe(hostile: Hostile) -> None:
    """An async describe is awaited before the create is sent."""
    p = hostile(create=lambda r, _: (201, approved(r)))

    async def describe(arguments: Mapping[str, Any]) -> str:
        await asyncio.sleep(0)
        return _said(arguments)

    out = run(_refund(hostile_guard(p), "async", [], describe=describe), "p_1", 4900)
    assert "refunded" == out
    assert "Refund 4900 of payment p_1." == p.bodies[0]["context"]


@pytest.mark.parametrize("mode", MODES)
def test_describe_sees_a_redacted_value_only_as_its_marker(hostile: Hostile, mode: str) -> None:
    """The sentence is made from what the reviewer sees: it cannot reveal a redacted value."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    tool = _refund(hostile_guard(p), mode, ran, describe=_said, redact=["payment_id"])
    assert "refunded" == run(tool, "p_SECRET", 4900)
    context = p.bodies[0]["context"]
    assert "p_SECRET" not in context
    assert "$redacted" in context


@pytest.mark.parametrize("mode", MODES)
def test_the_harness_reason_takes_the_place_of_describe(hostile: Hostile, mode: str) -> None:
    """With ``harness_call(reason=...)``, the tool's describe is not even asked."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    asked: list[Any] = []

    def describe(arguments: Mapping[str, Any]) -> str:
        asked.append(arguments)
        return "the tool's words"

    tool = _refund(hostile_guard(p), mode, [], describe=describe)
    assert "refunded" == _call(tool, reason="the agent's words")
    assert "the agent's words" == p.bodies[0]["context"]
    assert [] == asked


def _raises(arguments: Mapping[str, Any]) -> str:
    raise ValueError(f"no sentence for {arguments['payment_id']}")


async def _raises_async(arguments: Mapping[str, Any]) -> str:
    raise ValueError("no sentence")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("describe", "said"),
    [
        (_raises, "raised ValueError"),
        (lambda arguments: None, "returned not a string but a NoneType"),
        (lambda arguments: 42, "returned not a string but a int"),
        (lambda arguments: "  ", "returned an empty sentence"),
        (lambda arguments: "\udc80", "lone surrogate"),
    ],
)
def test_a_describe_that_raises_or_says_nothing_sends_nothing_and_does_not_run(
    hostile: Hostile, mode: str, describe: Callable[..., Any], said: str
) -> None:
    """Fail closed: no request, NOT_OBTAINED, a sentence saying why, no argument quoted."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    out = run(_refund(hostile_guard(p), mode, ran, describe=describe), "p_SECRET", 4900)
    assert isinstance(out, ag.NotRun)
    assert ag.Reason.NOT_OBTAINED == out.reason
    assert said in out.message
    assert "nothing was sent for approval and issue_refund did not run" in out.message
    assert "p_SECRET" not in out.message
    assert [] == ran
    assert [] == p.seen


def test_an_async_describe_that_raises_sends_nothing(hostile: Hostile) -> None:
    """The async path fails closed the same way."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    out = run(_refund(hostile_guard(p), "async", [], describe=_raises_async), "p_1", 4900)
    assert isinstance(out, ag.NotRun)
    assert "raised ValueError" in out.message
    assert [] == p.seen


def test_a_sync_tool_whose_describe_returns_a_coroutine_does_not_run(hostile: Hostile) -> None:
    """An awaitable from a plain describe (a lambda around a coroutine) is no sentence."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    out = run(
        _refund(hostile_guard(p), "sync", [], describe=lambda a: _raises_async(a)), "p_1", 4900
    )
    assert isinstance(out, ag.NotRun)
    assert "returned not a string but a coroutine" in out.message
    assert [] == p.seen
