"""Running one blocking function in a helper thread that the caller can stop waiting for.

A blocking socket read cannot be interrupted from another thread
(psf/requests#5633), and a provider that drips its answer a byte at a time
never trips a per-read timeout. So where a wait must end on time, the I/O runs
in a daemon helper thread and the caller waits on an event, with a deadline
of its own; a helper left behind finishes (or fails) on its own later.

Helpers are reused: a thread whose function has returned waits a while for the
next one instead of exiting, so a call does not pay for a new thread per
exchange. The pool never queues: a function is handed to an idle helper or to
a new one, so a long poll can never wait behind another.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any

#: Idle helpers kept at most; more exit as soon as their function returns.
IDLE_LIMIT = 32
#: How long an idle helper waits for a function before it exits (seconds).
IDLE_SECONDS = 20.0

_Job = tuple[Callable[[], Any], "Outcome", Callable[[], None] | None, str]


class Outcome:
    """What the helper thread produced: ``value`` or ``error``, and ``done`` once set."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        """The value, or raise the helper's exception."""
        if self.error is not None:
            raise self.error
        return self.value


class _Helper:
    """One reusable daemon thread: runs the job it is given, then waits for another."""

    __slots__ = ("_given", "_job", "_thread")

    def __init__(self, job: _Job) -> None:
        self._job: _Job | None = job
        # Held while there is no job: ``give`` releases it, the idle thread acquires it.
        self._given = threading.Lock()
        self._given.acquire()
        self._thread = threading.Thread(target=self._loop, name=job[3], daemon=True)
        self._thread.start()

    def give(self, job: _Job) -> None:
        self._job = job
        self._given.release()

    def _loop(self) -> None:
        thread = self._thread
        while True:
            job, self._job = self._job, None
            assert job is not None
            fn, outcome, on_done, name = job
            thread.name = name
            # A fresh context per function: nothing one sets is seen by the next.
            _run(contextvars.Context(), fn, outcome, on_done)
            del job, fn, outcome, on_done
            thread.name = "approval_guard-idle"
            if not _park(self):
                return
            if not self._given.acquire(timeout=IDLE_SECONDS):
                with _lock:
                    try:
                        _idle.remove(self)
                    except ValueError:
                        pass  # taken just now: its job is on the way
                    else:
                        return
                self._given.acquire()


def _run(
    context: contextvars.Context,
    fn: Callable[[], Any],
    outcome: Outcome,
    on_done: Callable[[], None] | None,
) -> None:
    try:
        outcome.value = context.run(fn)
    except BaseException as exc:  # handed to the waiting caller
        outcome.error = exc
    finally:
        outcome.done.set()
        if on_done is not None:
            on_done()


_lock = threading.Lock()
_idle: list[_Helper] = []
_pid = os.getpid()  # the process whose threads _idle holds


def _park(helper: _Helper) -> bool:
    """Put ``helper`` among the idle ones; False if enough are idle already (it exits)."""
    with _lock:
        if len(_idle) >= IDLE_LIMIT:
            return False
        _idle.append(helper)
        return True


def _forget_helpers() -> None:
    """In a forked child: the parent's idle helpers are not running here."""
    global _lock, _pid
    _lock = threading.Lock()
    _idle.clear()
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def start(
    fn: Callable[[], Any], *, name: str, on_done: Callable[[], None] | None = None
) -> Outcome:
    """Run ``fn`` in a daemon helper thread; ``on_done`` is called from it when it ends."""
    if _pid != os.getpid():
        # Forked by C code that runs no at-fork hook (uWSGI's workers): a job given to
        # an idle helper of the parent would never run, its thread not being here.
        _forget_helpers()
    outcome = Outcome()
    job: _Job = (fn, outcome, on_done, name)
    with _lock:
        helper = _idle.pop() if _idle else None
    if helper is None:
        _Helper(job)
    else:
        helper.give(job)
    return outcome
