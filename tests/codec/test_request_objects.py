"""Reading a provider's request object: its id must be a plain identifier, and an unknown
status is quoted bounded and printable.
"""

from __future__ import annotations

from typing import Any

import pytest

from approval_guard._codec.wire import WireError
from approval_guard._codec.wire_models import parse_request


def _request(**fields: Any) -> dict[str, Any]:
    return {
        "id": "7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71",
        "tool": "issue_refund",
        "arguments": {},
        "timeout": "30m",
        "status": "pending",
        "created_at": "2026-09-16T12:00:00Z",
        "deadline_at": "2026-09-16T12:30:00Z",
        **fields,
    }


@pytest.mark.parametrize("request_id", ["", "a b", "id\n", "id\x1b[2J", "x" * 201])
def test_a_request_id_that_is_not_a_plain_identifier_is_refused(request_id: str) -> None:
    """An id goes into URLs, logs and outcomes: empty, spaced, control or huge is WireError."""
    with pytest.raises(WireError):
        parse_request(_request(id=request_id))


def test_an_unknown_status_is_kept_bounded_and_printable() -> None:
    """An unknown status is quoted in the outcome: it comes out short and printable."""
    status = parse_request(_request(status="\x1b" + "s" * 10**5)).status
    assert len(status) < 100 and status.isprintable()
