"""approval_guard: put a person between an AI agent and its dangerous tools.

::

    import approval_guard as ag

    guard = ag.Guard(base_url="https://approvals.example.com", credential="...")

    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict: ...

    out = issue_refund("payment_123", 4900)   # the tool's result, or an ag.NotRun
"""

from ._clock import Clock, SystemClock
from ._default import requires_approval
from ._events import (
    ApprovalSkipped,
    ArgumentsEdited,
    CallNotRun,
    Decided,
    Event,
    RequestCreated,
    StillWaiting,
    ToolFinished,
    ToolStarted,
)
from ._guard import Guard
from ._harness import HarnessCall, harness_call
from ._ledger import Execution, Ledger, MemoryLedger
from ._ledger_pg import PostgresLedger
from ._ledger_sqlite import SQLiteLedger
from ._outcome import NotRun, Reason
from .exceptions import (
    ApprovalGuardError,
    ArgumentSerializationError,
    ConfigurationError,
    LedgerError,
)

__all__ = [
    "ApprovalGuardError",
    "ApprovalSkipped",
    "ArgumentSerializationError",
    "ArgumentsEdited",
    "CallNotRun",
    "Clock",
    "ConfigurationError",
    "Decided",
    "Event",
    "Execution",
    "Guard",
    "HarnessCall",
    "Ledger",
    "LedgerError",
    "MemoryLedger",
    "NotRun",
    "PostgresLedger",
    "Reason",
    "RequestCreated",
    "SQLiteLedger",
    "StillWaiting",
    "SystemClock",
    "ToolFinished",
    "ToolStarted",
    "harness_call",
    "requires_approval",
]
