"""The create's body is the canonical JSON of the whole payload, its arguments written once."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import approval_guard as ag
from approval_guard._call import plan as _plan
from approval_guard._call.execute import arguments_digest
from approval_guard._call.ops import CallPlan
from approval_guard._call.plan import new_idempotency_key, plan_call, request_body
from approval_guard._codec.duration import format_duration
from approval_guard._codec.exact_json import JSONNumber
from approval_guard._codec.serialize import dumps
from approval_guard.testing import LocalProvider, approve_after
from tests.support.forks import in_a_fresh_fork, in_c_forked_child
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


def test_every_call_gets_its_own_version_4_uuid_key() -> None:
    """A call without a harness key gets a fresh random UUID, written as uuid4() writes it."""
    keys = [new_idempotency_key() for _ in range(200)]
    assert len(set(keys)) == len(keys)
    for key in keys:
        parsed = uuid.UUID(key)
        assert (4, uuid.RFC_4122, key) == (parsed.version, parsed.variant, str(parsed))


def test_keys_are_random_past_one_read_of_the_system_random_source() -> None:
    """Keys stay distinct UUIDs when many are made (past what one 2 KiB random read gives)."""
    keys = [new_idempotency_key() for _ in range(3 * 2048 // 16 + 7)]
    assert len(set(keys)) == len(keys)
    assert all(uuid.UUID(key).version == 4 for key in keys)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_makes_the_key_its_parent_makes_next() -> None:
    """A child made by fork draws its own random digits, not the parent's next key."""
    new_idempotency_key()  # the parent holds unused random digits now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its first key, and leave without pytest's exit
        try:
            os.write(write, new_idempotency_key().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child_key = pipe.read().decode()
    os.waitpid(pid, 0)
    assert uuid.UUID(child_key).version == 4
    assert child_key != new_idempotency_key()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_without_pythons_fork_hooks_makes_keys_of_its_own() -> None:
    """A child forked by C code (as uWSGI forks its workers) never makes its parent's next key.

    Such a fork runs no ``os.register_at_fork`` hook: a key drawn from random bytes the
    parent read ahead would be the parent's next key, and two calls with one key and the
    same arguments are one request at the provider, so one approval could run twice.
    """

    def scenario() -> str:
        new_idempotency_key()  # the parent has made a key already
        child_key = in_c_forked_child(new_idempotency_key)
        try:
            version = uuid.UUID(child_key).version
        except ValueError:
            return child_key  # not a key: what became of the child
        return f"v{version} {child_key != new_idempotency_key()}"

    assert "v4 True" == in_a_fresh_fork(scenario)


class _Name(str):
    """A str subclass, as a caller might pass for requested_by."""


@pytest.mark.parametrize(
    ("editable", "requested_by"),
    [((), None), (("amount",), None), ((), "alice@example.com"), ((), _Name("bob"))],
)
def test_a_plans_body_is_the_whole_payload_call_after_call(
    provider: LocalProvider, editable: tuple[str, ...], requested_by: str | None
) -> None:
    """The fields after the arguments, kept per tool, are the ones each call would write."""
    guard = make_guard(provider)
    spec = refund_tool(guard, []).__approval_guard__  # type: ignore[attr-defined]
    spec = attrs.evolve(spec, editable=editable)
    for amount in (1, 2, 1):
        args = ("p", amount)
        plan = plan_call(
            spec,
            args,
            {},
            idempotency_key=None,
            limit=None,
            settings=guard._settings,
            clock=guard._clock,
            worker="w",
            redaction_key=b"k" * 32,
            requested_by=requested_by,
        )
        assert isinstance(plan, CallPlan)
        rest: dict[str, Any] = {"tool": spec.name, "timeout": format_duration(plan.timeout)}
        if editable:
            rest["editable"] = list(editable)
        if requested_by is not None:
            rest["requested_by"] = str(requested_by)
        assert dumps({"arguments": plan.arguments, **rest}) == plan.body


def test_the_kept_body_tails_stay_bounded() -> None:
    """However many tools and people, at most _MAX_TAILS tails are kept."""
    for i in range(_plan._MAX_TAILS + 10):
        _plan._body_tail("t", 60.0, (), f"person {i}")
    assert len(_plan._TAILS) <= _plan._MAX_TAILS
