"""The store keeps only what JSON can keep exactly, and still serves what an older version
stored (an Infinity) as valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from approval_guard._codec.exact_json import MAX_JSON_DEPTH, InvalidJSON
from approval_guard.provider.store.opening import Store
from approval_guard.testing import LocalProvider
from tests.support.api import Api
from tests.support.raw_http import listed, nested


@pytest.mark.parametrize(
    "value",
    [
        float("inf"),
        float("nan"),
        "\ud800",
        {"\udc00": 1},
        {1: "x"},
        object(),
        json.loads(nested(MAX_JSON_DEPTH)),
    ],
    ids=["inf", "nan", "surrogate", "surrogate key", "int key", "object", "too deep"],
)
def test_the_store_refuses_what_json_cannot_keep(value: Any) -> None:
    """Store.create_request refuses a value it could not store exactly, and writes nothing."""
    store = Store(":memory:")
    try:
        store.ensure_initial_credentials()
        owner = next(c for c in store.list_credentials() if c.kind == "instance")
        with pytest.raises(InvalidJSON):
            store.create_request(
                owner=owner,
                idempotency_key="k",
                tool="t",
                arguments={"v": value},
                timeout_seconds=60,
            )
        assert [] == store.list_requests()
    finally:
        store.close()


def test_a_non_finite_number_stored_by_an_older_version_is_still_served(
    provider: LocalProvider, api: Api
) -> None:
    """An Infinity an older provider stored reads back as a string: valid JSON, no 500."""
    created = api.new(arguments={"n": 1})
    with provider.store.transaction() as db:
        db.execute(
            "UPDATE requests SET arguments = ? WHERE id = ?", ('{"n":Infinity}', created["id"])
        )

    polled = api.poll(created["id"])

    assert (200, {"n": "Infinity"}) == (polled.status_code, polled.json()["arguments"])
    assert [created["id"]] == [r["id"] for r in listed(provider)["requests"]]
