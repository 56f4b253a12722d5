"""The NotRun handed back to the model: its sentence, falsy, JSON; writable whatever a
provider's note holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import approval_guard as ag
from tests.support.hostile import HostileProvider, denied, hostile_guard, short_refund


def test_not_run_is_easy_to_hand_to_a_model() -> None:
    """str() is the message, it is falsy, and it serialises to JSON."""
    out = ag.NotRun(reason=ag.Reason.DENIED, message="A person denied it.", tool="t")
    assert "A person denied it." == str(out)
    assert not out
    assert '"reason": "denied"' in out.to_json()
    assert "denied" == ag.Reason.DENIED == str(ag.Reason.DENIED)  # type: ignore[comparison-overlap]


# Found in the adversarial review of the guard side (what it does with answers).
@pytest.mark.parametrize("note", ["\ud800", "no \udfff way", "\ud83d"])
def test_a_note_with_a_lone_surrogate_gives_an_outcome_that_can_be_written(
    hostile: Callable[..., HostileProvider], note: str
) -> None:
    """JSON may escape a lone surrogate; the NotRun's sentence and JSON must still encode."""
    raw = json.dumps(denied({}, note))  # escaped as \\udXXX, as a provider would send it
    p = hostile(create=lambda r, _: (201, {**r, **json.loads(raw)}))
    out = short_refund(hostile_guard(p), [])("p", 1)
    assert isinstance(out, ag.NotRun) and ag.Reason.DENIED == out.reason
    str(out).encode("utf-8")
    out.to_json().encode("utf-8")
    assert out.note is not None and "\ufffd" in out.note
