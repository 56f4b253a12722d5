"""A forked child never uses its parent's pooled connections to the provider."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.forks import c_fork, in_a_fresh_fork, in_child_of
from tests.support.hostile import HostileProvider, approved, hostile_guard, short_refund


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("fork", [os.fork, c_fork], ids=["os_fork", "c_fork"])
def test_a_forked_child_opens_a_connection_of_its_own(
    hostile: Callable[..., HostileProvider], fork: Callable[[], int]
) -> None:
    """One socket read by two processes would hand each the other's answers: never shared."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    tool = short_refund(hostile_guard(p), [])

    def call_in_child() -> str:
        tool("p", 2)  # what it answers does not matter here: which connection it uses does
        return "called"

    def scenario() -> str:
        parent = tool("p", 1)  # the parent's connection stays pooled
        return f"parent {parent}, child {in_child_of(fork, call_in_child)}"

    # In a fresh fork: C code's fork(2) beside this process's busy threads could hang.
    assert "parent refunded, child called" == in_a_fresh_fork(scenario)
    assert 2 == len(p.peers)
    parent, child = p.peers
    assert parent != child, "the child sent its request on the parent's connection"


def test_the_parent_keeps_its_pooled_connection(hostile: Callable[..., HostileProvider]) -> None:
    """Without a fork, calls reuse the pooled connection (the check above is not vacuous)."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    ran: list[Any] = []
    tool = short_refund(hostile_guard(p), ran)
    tool("p", 1)
    tool("p", 2)
    assert 2 == len(p.peers) and p.peers[0] == p.peers[1]
