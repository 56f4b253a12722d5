"""The watchdog shuts a watched exchange's socket when its deadline passes, and only then."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from approval_guard._transport import watchdog
from tests.support.api import wait_for
from tests.support.forks import in_a_fresh_fork, in_c_forked_child


class Connection:
    """Stands in for a urllib3 connection: all the watchdog reads of one is ``sock``."""

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    yield a, b
    a.close()
    b.close()


def test_a_passed_deadline_ends_a_blocked_read(pair: tuple[socket.socket, socket.socket]) -> None:
    """A read that would block for its whole timeout ends when the deadline passes."""
    a, _ = pair
    started = time.monotonic()
    with watchdog.kept(0.2) as deadline:
        watchdog._watchdog.attach(deadline, Connection(a))
        assert b"" == a.recv(1)  # shut: seen as the connection closed
    assert deadline.fired
    assert time.monotonic() - started < 5


def test_a_deadline_disarmed_in_time_leaves_its_socket_alone(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Once the exchange is over, its (pooled) socket is never shut by the old deadline."""
    a, b = pair
    with watchdog.kept(0.1) as deadline:
        watchdog._watchdog.attach(deadline, Connection(a))
    time.sleep(0.3)
    a.sendall(b"x")
    assert b"x" == b.recv(1)
    assert not deadline.fired


def test_nothing_is_sent_once_the_deadline_has_passed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A connection joining an exchange past its deadline is refused, its socket shut."""
    a, _ = pair
    with watchdog.kept(0.05) as deadline:
        wait_for(lambda: deadline.fired, timeout=5)
        with pytest.raises(TimeoutError):
            watchdog._watchdog.attach(deadline, Connection(a))
    assert b"" == a.recv(1)


def test_a_connection_without_a_socket_yet_is_caught_after_it_connects(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A deadline passing while no socket exists (connecting) shuts it once connected."""
    a, _ = pair
    conn = Connection(None)
    with watchdog.kept(0.05) as deadline:
        watchdog._watchdog.attach(deadline, conn)
        wait_for(lambda: deadline.fired, timeout=5)
        conn.sock = a  # the connect returns
        with pytest.raises(TimeoutError):
            watchdog._watchdog.attach(deadline, conn)
    assert b"" == a.recv(1)


def test_deadlines_fire_in_their_own_order(pair: tuple[socket.socket, socket.socket]) -> None:
    """A shorter deadline armed after a longer one still fires first."""
    a, b = pair
    with watchdog.kept(30) as long:
        watchdog._watchdog.attach(long, Connection(b))
        with watchdog.kept(0.1) as short:
            watchdog._watchdog.attach(short, Connection(a))
            assert b"" == a.recv(1)
        assert short.fired and not long.fired


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_without_pythons_fork_hooks_keeps_its_deadlines() -> None:
    """A child forked by C code (uWSGI's workers) has no watchdog thread yet: it starts one."""

    def blocked_read() -> str:
        a, b = socket.socketpair()
        a.settimeout(10)
        started = time.monotonic()
        with watchdog.kept(0.2) as deadline:
            watchdog._watchdog.attach(deadline, Connection(a))
            got = a.recv(1)
        b.close()  # only now: the peer stays open while the read waits
        return f"{got!r} {deadline.fired} {time.monotonic() - started < 5}"

    def scenario() -> str:
        with watchdog.kept(0.01):
            pass  # the parent's watchdog thread is running
        return in_c_forked_child(blocked_read)

    assert "b'' True True" == in_a_fresh_fork(scenario)
