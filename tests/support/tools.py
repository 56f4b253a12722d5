"""Guarded tools for the option tests: each one sync or async (``MODES``), and reviewer policies."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import approval_guard as ag
from approval_guard.testing import LocalProvider

MODES = ("sync", "async")


def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a guarded tool, sync or async (whichever it is)."""
    out = fn(*args, **kwargs)
    if asyncio.iscoroutine(out):
        return asyncio.run(out)
    return out


def define(
    guard: ag.Guard, mode: str, body: Callable[..., Any], **options: Any
) -> Callable[..., Any]:
    """``body`` guarded as a sync or an async tool with the same signature and name."""
    import functools

    if mode == "sync":

        @functools.wraps(body)
        def tool(*args: Any, **kwargs: Any) -> Any:
            return body(*args, **kwargs)

    else:

        @functools.wraps(body)
        async def tool(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return body(*args, **kwargs)

    return guard.requires_approval(**options)(tool)


def refund(ran: list[Any]) -> Callable[..., Any]:
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        ran.append((payment_id, amount, currency))
        return {"refunded": amount, "currency": currency}

    return issue_refund


# --------------------------------------------------------------------------- editable=


def edit_to(**changes: Any) -> Callable[[LocalProvider, Any], None]:
    """A policy: approve each new request with these arguments changed."""

    def policy(provider: LocalProvider, request: Any) -> None:
        provider.approve(request.id, arguments={**request.arguments, **changes})

    return policy


class Currency(str, enum.Enum):
    GBP = "GBP"
    EUR = "EUR"


@dataclasses.dataclass
class Card:
    holder: str
    number: str
