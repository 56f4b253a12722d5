"""Helper threads are reused, never queue a function behind another, and isolate each run."""

from __future__ import annotations

import contextvars
import multiprocessing
import os
import threading
import warnings

import pytest

from approval_guard._transport import threads
from tests.support.forks import in_a_fresh_fork, in_c_forked_child

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def _wait(outcome: threads.Outcome) -> object:
    assert outcome.done.wait(10)
    return outcome.result()


def test_a_finished_helper_runs_the_next_function() -> None:
    """Two functions one after the other run on the same helper: no new thread per exchange."""
    first = _wait(threads.start(threading.get_ident, name="approval_guard-test"))
    second = _wait(threads.start(threading.get_ident, name="approval_guard-test"))
    assert first == second


def test_functions_given_at_once_all_run_at_once() -> None:
    """Twenty blocking functions started together all run together: none waits for a helper."""
    gate = threading.Barrier(21, timeout=10)
    outcomes = [threads.start(gate.wait, name="approval_guard-test") for _ in range(20)]
    gate.wait()  # breaks (BrokenBarrierError) unless all twenty are running at once
    assert all(outcome.done.wait(10) for outcome in outcomes)
    assert [None] * 20 == [outcome.error for outcome in outcomes]


def test_a_helper_hands_back_the_exception_and_runs_on_done() -> None:
    """The function's exception is the caller's; ``on_done`` runs after the outcome is set."""
    seen: list[bool] = []
    go = threading.Event()  # the helper waits until ``outcome`` is bound here

    def fail() -> float:
        go.wait(10)
        return 1 / 0

    outcome = threads.start(
        fail,
        name="approval_guard-test",
        on_done=lambda: seen.append(outcome.done.is_set()),
    )
    go.set()
    assert outcome.done.wait(10)
    try:
        outcome.result()
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the helper's exception was not handed back")
    for _ in range(100):
        if seen:
            break
        threading.Event().wait(0.01)
    assert [True] == seen


def test_each_function_runs_in_a_fresh_context() -> None:
    """A context variable one function sets is not seen by the next on the same helper."""

    def set_mark() -> str:
        MARK.set("first")
        return MARK.get()

    assert "first" == _wait(threads.start(set_mark, name="approval_guard-test"))
    assert "unset" == _wait(threads.start(MARK.get, name="approval_guard-test"))


def test_the_helper_is_named_for_its_function() -> None:
    """A running helper carries the name it was given (tools that list threads read it)."""
    name = _wait(
        threads.start(lambda: threading.current_thread().name, name="approval_guard-named")
    )
    assert "approval_guard-named" == name


def _child_runs_a_helper(queue: multiprocessing.Queue[object]) -> None:
    queue.put(_wait(threads.start(lambda: "ran", name="approval_guard-test")))


def test_a_forked_child_does_not_wait_on_the_parents_idle_helpers() -> None:
    """After fork() the parent's idle helpers do not exist: the child starts its own."""
    _wait(threads.start(lambda: None, name="approval_guard-test"))  # leaves a helper idle
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_child_runs_a_helper, args=(queue,))
    with warnings.catch_warnings():
        # 3.12+ warns that forking a threaded process may deadlock: the case tested here.
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    try:
        assert "ran" == queue.get(timeout=10)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_without_pythons_fork_hooks_starts_helpers_of_its_own() -> None:
    """A child forked by C code (uWSGI's workers) never gives a job to a parent's idle helper."""

    def run_one() -> str:
        outcome = threads.start(lambda: "ran", name="approval_guard-test")
        return str(outcome.result()) if outcome.done.wait(10) else "never ran"

    def scenario() -> str:
        _wait(threads.start(lambda: None, name="approval_guard-test"))  # leaves a helper idle
        return in_c_forked_child(run_one)

    assert "ran" == in_a_fresh_fork(scenario)
