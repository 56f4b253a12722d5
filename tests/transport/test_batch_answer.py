"""A batched wait's answer, read strictly: what it hands on, what it leaves to a plain poll."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import json
from typing import Any

import pytest

from approval_guard._transport.batch_answer import MAX_IDS, MAX_IDS_BYTES, fitting, read_batch


def _item(rid: str, **changes: Any) -> dict[str, Any]:
    item = {
        "id": rid,
        "status": "approved",
        "tool": "issue_refund",
        "arguments": {},
        "timeout": "10m",
        "created_at": "2026-01-01T00:00:00Z",
        "deadline_at": "2099-01-01T00:00:00Z",
        "decision": {
            "status": "approved",
            "note": None,
            "decided_at": "2026-01-01T00:01:00Z",
            "expires_at": "2099-01-01T00:00:00Z",
        },
    }
    item.update(changes)
    return item


@pytest.mark.parametrize(
    "body",
    [None, [], "x", {"requests": {}}, {"requests": [], "not_found": "a"}, {"not_found": []}],
)
def test_a_body_not_of_the_documented_shape_is_not_read(body: Any) -> None:
    """Anything but {"requests": [...], "not_found": [...]} gives nothing to hand on."""
    assert None is read_batch(["a"], body)


def test_only_listed_well_formed_items_named_once_are_handed_on() -> None:
    """Unlisted, twice-named, unparsable and not-found ids are never handed on as answers."""
    body = {
        "requests": [
            _item("a"),
            _item("b"),
            _item("b"),
            _item("c", created_at="not a time"),
            _item("stranger"),
            "not an item",
            {"id": 7},
        ],
        "not_found": ["d", "stranger", 3],
    }

    reading = read_batch(["a", "b", "c", "d", "e"], body)

    assert reading is not None
    assert ["a"] == list(reading.found)
    assert frozenset({"b", "c", "d"}) == reading.doubtful
    assert reading.news


def test_an_answer_about_nothing_listed_is_no_news() -> None:
    """Items and not-found ids the batch did not list do not count as news."""
    reading = read_batch(["a"], {"requests": [_item("x")], "not_found": ["y"]})

    assert reading is not None
    assert ({}, frozenset(), False) == (reading.found, reading.doubtful, reading.news)


def test_ids_fit_a_batch_by_count_and_by_body_size() -> None:
    """fitting() stops at MAX_IDS ids and at MAX_IDS_BYTES bytes of ids."""
    assert MAX_IDS - 1 == fitting(["k"], [f"r{n}" for n in range(2 * MAX_IDS)])
    long = ["x" * 190 + f"{n:05}" for n in range(MAX_IDS)]
    taken = fitting([], long)
    size = sum(len(json.dumps(rid)) + 2 for rid in long[:taken])
    assert size <= MAX_IDS_BYTES < size + len(json.dumps(long[taken])) + 2
