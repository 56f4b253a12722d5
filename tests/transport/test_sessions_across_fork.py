"""A forked child never uses its parent's pooled connections to the provider."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.forks import c_fork
from tests.support.hostile import HostileProvider, approved, hostile_guard, short_refund


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("fork", [os.fork, c_fork], ids=["os_fork", "c_fork"])
def test_a_forked_child_opens_a_connection_of_its_own(
    hostile: Callable[..., HostileProvider], fork: Callable[[], int]
) -> None:
    """One socket read by two processes would hand each the other's answers: never shared."""
    p = hostile(create=lambda r, _: (201, approved(r)))
    tool = short_refund(hostile_guard(p), [])
    assert "refunded" == tool("p", 1)  # the parent's connection stays pooled
    with warnings.catch_warnings():
        # 3.12+ warns that forking a threaded process may deadlock (the server's threads).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = fork()
    if pid == 0:  # the child: one call, then leave without pytest's exit
        try:
            tool("p", 2)
        finally:
            os._exit(0)
    assert pid > 0
    _, status = os.waitpid(pid, 0)
    assert 0 == status
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
