"""approval_guard: put a person between an AI agent and its dangerous tools.

::

    import approval_guard as ag

    guard = ag.Guard(base_url="https://approvals.example.com", credential="...")

    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict: ...

    out = issue_refund("payment_123", 4900)   # the tool's result, or an ag.NotRun
"""

from approval_guard._call.events import (
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
from approval_guard._call.outcome import NotRun, Reason
from approval_guard._codec.clock import Clock, SystemClock
from approval_guard._default import requires_approval
from approval_guard._guard import Guard
from approval_guard._harness import HarnessCall, harness_call
from approval_guard._ledger.memory import MemoryLedger
from approval_guard._ledger.postgres import PostgresLedger
from approval_guard._ledger.protocol import Execution, Ledger
from approval_guard._ledger.sqlite import SQLiteLedger
from approval_guard.exceptions import (
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
