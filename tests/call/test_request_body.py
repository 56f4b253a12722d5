"""The create's body is the canonical JSON of the whole payload, its arguments written once."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._call.execute import arguments_digest
from approval_guard._call.ops import CallPlan
from approval_guard._call.plan import request_body
from approval_guard._codec.exact_json import JSONNumber
from approval_guard._codec.serialize import dumps
from approval_guard.testing import LocalProvider, approve_after
from tests.support.guards import make_guard, refund_tool

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
REST = st.fixed_dictionaries(
    {"tool": st.text(min_size=1), "timeout": st.sampled_from(["1m", "30m", "2h"])},
    optional={
        "editable": st.lists(st.text(min_size=1), min_size=1, max_size=3),
        "requested_by": st.text(min_size=1),
    },
)


@given(arguments=st.dictionaries(st.text(), JSON_VALUES, max_size=5), rest=REST)
def test_the_body_is_the_whole_payload_written_at_once(
    arguments: dict[str, Any], rest: dict[str, Any]
) -> None:
    """Reusing the arguments' JSON gives exactly the bytes of the whole payload's JSON."""
    assert dumps({"arguments": arguments, **rest}) == request_body(dumps(arguments), rest)


def test_an_exact_number_in_the_arguments_keeps_its_text() -> None:
    """A JSONNumber (written by the slow encoder) is in the body as it is alone."""
    arguments = {"amount": JSONNumber("1.10"), "note": "é"}
    rest = {"tool": "t", "timeout": "1m"}
    body = request_body(dumps(arguments), rest)
    assert dumps({"arguments": arguments, **rest}) == body
    assert b'"amount":1.10' in body


def test_the_record_digest_is_of_the_arguments_sent(provider: LocalProvider) -> None:
    """The plan keeps the arguments' JSON; its digest is the one the record always had."""
    guard = make_guard(provider)
    spec = refund_tool(guard, []).__approval_guard__  # type: ignore[attr-defined]
    plan, _ = guard._plan(spec, ("p", 1), {}, spec.bind(("p", 1), {}))
    assert isinstance(plan, CallPlan) and plan.arguments_json is not None
    assert json.loads(plan.body)["arguments"] == json.loads(plan.arguments_json)
    assert arguments_digest(plan.arguments) == hashlib.sha256(plan.arguments_json).hexdigest()


def test_a_run_records_the_digest_of_what_was_sent(provider: LocalProvider) -> None:
    """After a run, the execution record holds the digest of the arguments as sent."""
    provider.policy = approve_after(0.0)
    ledger = ag.MemoryLedger()
    refund_tool(make_guard(provider, ledger=ledger), [])("p", 1)
    expected = hashlib.sha256(b'{"amount":1,"currency":"GBP","payment_id":"p"}').hexdigest()
    assert [expected] == [row.arguments_digest for row in ledger.recent()]
