"""What one exchange with the provider gives back: an ``Answer``, or a ``TransportError``."""

from __future__ import annotations

from typing import Any

import attrs

from approval_guard._codec.clock import ClockSample
from approval_guard._codec.safe_text import safe_text
from approval_guard._codec.wire import MESSAGE_LIMIT
from approval_guard._codec.wire_models import parse_error

__all__ = ["MAX_ANSWER_BYTES", "Answer", "TransportError"]

#: Larger answers are refused, not parsed.
MAX_ANSWER_BYTES = 1024 * 1024


class TransportError(Exception):
    """No usable answer: connection refused/reset, timeout, garbage or oversized body.

    The message is bounded and printable (it ends up in logs and in ``NotRun``
    sentences) and never quotes a header value.
    """

    def __init__(self, kind: str, message: str) -> None:
        message = safe_text(message, MESSAGE_LIMIT)
        super().__init__(message)
        self.kind = kind
        self.message = message


@attrs.frozen(slots=False)  # dict-backed, as ClockSample is: one per exchange
class Answer:
    """One HTTP answer from the provider, decoded."""

    status: int
    body: Any
    provider_request_id: str | None
    sample: ClockSample
    retry_after: float | None = None
    #: Not from the wire: a batched wait (API 1.2) ended with no news of the request
    #: polled, which is as last read (``body`` is None).
    unchanged: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> tuple[str, str]:
        """``(type, message)`` of an error answer (``("unknown", "")`` if the body has none)."""
        return parse_error(self.body) or ("unknown", "")

    def describe(self) -> str:
        kind, message = self.error
        text = f"HTTP {self.status} {kind}"
        return f"{text}: {message}" if message else text
