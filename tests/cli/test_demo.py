"""``approval-guard demo``: the refund example guarded, decided by ``--decide``, its outcome
printed.
"""

from __future__ import annotations

import json
from pathlib import Path

from approval_guard.cli._demo import load_refund_example
from tests.support.cli import cli


def test_demo_decide_approve_runs_the_refund() -> None:
    """``demo --decide approve --after 1s`` ends with the refund's result and exit code 0."""
    done = cli("demo", "--decide", "approve", "--after", "1s")

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "/?token=agr_" in done.stdout  # where to approve in a browser
    assert "approve " in done.stdout and "--token agr_" in done.stdout  # the CLI command
    assert "waiting for a decision on" in done.stdout  # the live line
    assert "Approve, and allow calls like this for" in done.stdout  # the page's grant, said
    assert "Outcome of the repeat" not in done.stdout  # no grant given: no repeat
    outcome = done.stdout.split("Outcome: approved, and issue_refund ran. It returned:", 1)[1]
    refund = json.loads(outcome)
    assert {
        "payment_id": "payment_123",
        "amount": 4900,
        "currency": "GBP",
        "status": "refunded",
    } == {k: refund[k] for k in ("payment_id", "amount", "currency", "status")}
    assert refund["refund_id"].startswith("re_")


def test_demo_decide_deny_ends_with_reason_denied() -> None:
    """``demo --decide deny`` reports the call did not run, reason denied, and exits 0."""
    done = cli("demo", "--decide", "deny", "--after", "0s")

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "Outcome: issue_refund did not run (reason: denied)." in done.stdout
    assert "the payment is not a duplicate" in done.stdout
    assert "refund_id" not in done.stdout


def test_refund_example_loads_from_the_checkout() -> None:
    """The demo finds examples/refund_tool.py and its build() guards issue_refund."""
    module = load_refund_example()

    assert Path(module.__file__ or "").name == "refund_tool.py"
    assert callable(module.build)
