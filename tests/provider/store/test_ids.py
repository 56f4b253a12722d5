"""Random ids: uuid4 texts, never repeated, and a forked child (even by C code) draws its own."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from approval_guard.provider.store.ids import new_id
from tests.support.api import wait_for
from tests.support.forks import in_a_fresh_fork, in_c_forked_child


def test_ids_are_uuid4_texts() -> None:
    """Each id is the 36-character text of a version-4 UUID."""
    one = new_id()
    assert (36, 4, one) == (len(one), uuid.UUID(one).version, str(uuid.UUID(one)))


def test_ids_do_not_repeat_across_many_batches() -> None:
    """Ten thousand ids (many reads of the OS's randomness) are all different."""
    assert 10_000 == len({new_id() for _ in range(10_000)})


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_the_parents_next_ids() -> None:
    """After a fork the child's ids are its own, not the ones the parent will give next."""
    new_id()  # the parent's pool holds unread ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        os.write(write, ",".join(new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parent = {new_id() for _ in range(8)}
    assert set() == child & parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_by_c_code_does_not_hand_out_the_parents_next_ids() -> None:
    """fork(2) without Python's at-fork hooks (uWSGI's workers): the child's ids are its own."""

    def scenario() -> str:
        new_id()  # a pool read ahead would hold unread ids now
        text = in_c_forked_child(lambda: ",".join(new_id() for _ in range(8)))
        child = set(text.split(","))
        if len(child) != 8:
            return text  # not 8 ids: what became of the child
        parent = {new_id() for _ in range(8)}
        return f"{len(child)} ids, {len(child & parent)} of them the parent's"

    assert "8 ids, 0 of them the parent's" == in_a_fresh_fork(scenario)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_thread_draws_an_id_can_draw_its_own() -> None:
    """A fork while another thread holds the pool's lock: the child's first id does not hang."""
    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            new_id()

    threads = [threading.Thread(target=draw, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    hung = 0
    try:
        for _ in range(10):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                new_id()
                os._exit(0)
            try:
                wait_for(lambda: os.waitpid(pid, os.WNOHANG)[0], timeout=5)  # noqa: B023
            except AssertionError:
                hung += 1
                os.kill(pid, 9)
                os.waitpid(pid, 0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert 0 == hung
