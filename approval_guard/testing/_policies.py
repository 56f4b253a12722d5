"""Testing policies: how a :class:`~approval_guard.testing.LocalProvider` decides requests.

Re-exported by :mod:`approval_guard.testing`; import them from there.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

import attrs

from approval_guard._codec.wire import APPROVED, DENIED
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.provider.store.models import NotPendingError

if TYPE_CHECKING:
    from approval_guard.testing import LocalProvider

__all__ = ["Policy", "Validity", "approve_after", "deny_after"]

Validity = str | timedelta | float


class Policy(Protocol):
    """Decides requests as they arrive; called in its own thread, once per request."""

    def __call__(self, provider: LocalProvider, request: ApprovalRequest) -> None: ...


@attrs.frozen
class _DecideAfter:
    """A policy: after ``delay`` seconds, approve (or deny) every new request."""

    status: str
    delay: float
    note: str | None = None
    valid_for: Validity = "5m"

    def __call__(self, provider: LocalProvider, request: ApprovalRequest) -> None:
        if not provider._sleep(self.delay):
            return
        try:
            if self.status == APPROVED:
                provider.approve(request.id, note=self.note, valid_for=self.valid_for)
            else:
                provider.deny(request.id, self.note)
        except NotPendingError:
            pass  # cancelled or expired first: nothing to decide


def approve_after(
    delay: float = 0.0, *, note: str | None = None, valid_for: Validity = "5m"
) -> Policy:
    """A policy that approves every new request ``delay`` seconds after it appears.

    Args:
        delay: Seconds after it appears.
        note: The approval's note.
        valid_for: How long each approval stays valid.
    """
    return _DecideAfter(APPROVED, _check_delay(delay), note, valid_for)


def deny_after(delay: float = 0.0, note: str | None = "denied by policy") -> Policy:
    """A policy that denies every new request ``delay`` seconds after it appears.

    Args:
        delay: Seconds after it appears.
        note: The denial's note.
    """
    return _DecideAfter(DENIED, _check_delay(delay), note)


def _check_delay(delay: float) -> float:
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay):
        raise ValueError(f"delay must be a number of seconds, not {delay!r}")
    if delay < 0:
        raise ValueError(f"delay must not be negative, got {delay!r}")
    return float(delay)
