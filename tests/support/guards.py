"""Guards and tools on a real local provider, and running a call in a thread or under Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import approval_guard as ag
from approval_guard.testing import LocalProvider


def make_guard(p: LocalProvider, **options: Any) -> ag.Guard:
    settings: dict[str, Any] = {
        "base_url": p.url,
        "credential": p.credential,
        "harness_limit": "2m",
        "poll_wait": "5s",
        "return_margin": "1s",
        "deadline_margin": "1s",
    }
    settings.update(options)
    return ag.Guard(**settings)


def refund_tool(guard: ag.Guard, ran: list[Any], timeout: str = "30m") -> Callable[..., Any]:
    @guard.requires_approval(timeout=timeout)
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        ran.append((payment_id, amount, currency))
        return {"refund_id": "re_1", "amount": amount}

    return issue_refund


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["out"] = fn()
        except BaseException as exc:  # surfaced to the test below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def ctrl_c_during(call: Callable[[], Any], *, after: float) -> Any:
    """Run ``call`` in this (main) thread and press Ctrl-C ``after`` seconds into it."""
    timer = threading.Timer(after, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        return call()
    finally:
        timer.cancel()


def finish(thread: threading.Thread, box: dict[str, Any], timeout: float = 30) -> Any:
    thread.join(timeout)
    assert not thread.is_alive(), "the guarded call did not return"
    if "error" in box:
        raise box["error"]
    return box["out"]
