"""A refund tool that only runs once a person has approved it.

An agent that handles customer support may issue refunds, but a person should
approve each one. ``issue_refund`` below is an ordinary function; the decorator
holds each call until a reviewer approves or denies it at the provider, and
returns either the refund or an :class:`approval_guard.NotRun` that says why the
money did not move.

This file is the demo's tool: ``approval-guard demo`` loads it and calls
:func:`build` with a guard bound to its own temporary provider. To run it by
hand against a provider you started with ``approval-guard serve``::

    export APPROVAL_GUARD_URL=http://127.0.0.1:8765
    export APPROVAL_GUARD_CREDENTIAL=<the instance credential serve printed>
    python examples/refund_tool.py payment_123 4900 GBP

then approve it in the review page or with ``approval-guard approve ID``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any, Protocol

import approval_guard as ag


class RefundTool(Protocol):
    """The guarded ``issue_refund``: the refund, or why it did not happen."""

    def __call__(
        self, payment_id: str, amount: int, currency: str = "GBP"
    ) -> dict[str, Any] | ag.NotRun: ...


def build(guard: ag.Guard) -> RefundTool:
    """Return ``issue_refund`` guarded by ``guard``: each call waits for a person."""

    # The reviewer may correct the amount when approving (the refund then runs
    # with the amount they set); everything else is read-only on the review page.
    @guard.requires_approval(timeout="30m", editable=("amount",))
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        """Refund ``amount`` (in minor units: 4900 is 49.00) of ``payment_id``.

        A real tool would call the payment processor here; this one makes up a
        refund id, which is enough to see that the call ran.
        """
        if amount <= 0:
            raise ValueError(f"a refund amount must be positive, got {amount}")
        return {
            "refund_id": f"re_{uuid.uuid4().hex[:16]}",
            "payment_id": payment_id,
            "amount": amount,
            "currency": currency,
            "status": "refunded",
        }

    return issue_refund


def guard_from_env() -> ag.Guard:
    """A guard configured from ``APPROVAL_GUARD_URL`` and ``APPROVAL_GUARD_CREDENTIAL``."""
    url = os.environ.get("APPROVAL_GUARD_URL", "http://127.0.0.1:8765")
    credential = os.environ.get("APPROVAL_GUARD_CREDENTIAL")
    if not credential:
        raise SystemExit(
            "set APPROVAL_GUARD_CREDENTIAL to the instance credential that "
            "`approval-guard serve` printed on its first start"
        )
    # Plain http:// is accepted only to this machine (loopback); anything else needs https.
    return ag.Guard(base_url=url, credential=credential)


def main(argv: list[str] | None = None) -> int:
    """Ask for one refund and print what happened."""
    args = sys.argv[1:] if argv is None else argv
    payment_id = args[0] if args else "payment_123"
    amount = int(args[1]) if len(args) > 1 else 4900
    currency = args[2] if len(args) > 2 else "GBP"

    issue_refund = build(guard_from_env())
    print(f"waiting for a person to approve issue_refund({payment_id!r}, {amount}, {currency!r})")
    result = issue_refund(payment_id, amount, currency)
    if isinstance(result, ag.NotRun):
        print(f"not run ({result.reason}): {result}")
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
