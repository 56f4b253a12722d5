"""Forking as C code does (uWSGI's workers): fork(2) itself, no ``os.register_at_fork`` hook.

fork(2) from a process whose other threads are busy is a hazard of its own: a child
forked while another thread held a lock of the interpreter (the GIL's own mutex,
taken for a moment at every hand-over) waits for that thread forever. pytest's
workers run threads of their own, and the test servers run more. So a scenario that
forks as C code runs in :func:`in_a_fresh_fork`: a child of ``os.fork()``, which
Python leaves with one thread and a fresh GIL. Only what the scenario starts runs
beside it there, and :func:`c_fork` forks once those threads have gone idle.

Only the interpreter's own locks are made anew in that child: a lock another thread
of the worker held at the fork (a buffered stream's, a module's) stays held there.
So a scenario writes its answer only to the pipe it is given, never to stdout,
stderr or a log the worker's threads write to.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import time
import warnings
from collections.abc import Callable

#: Seconds a forked child has to answer.
CHILD_LIMIT = 30.0

#: Seconds a fresh fork's own threads (the watchdog, idle helpers) get to go idle
#: (blocked on a lock, away from the GIL) before :func:`c_fork` forks.
SETTLE = 0.2

_fresh_pid: int | None = None  # the process in_a_fresh_fork made, if this is it


def c_fork() -> int:
    """fork(2) called directly: the child runs none of Python's at-fork hooks.

    Only in a process made by :func:`in_a_fresh_fork`, where no thread but the
    scenario's own can hold a lock of the interpreter.
    """
    assert _fresh_pid == os.getpid(), "c_fork() forks only in in_a_fresh_fork()"
    time.sleep(SETTLE)
    # PyDLL: the GIL stays held across fork(2). CDLL would release it, and a child
    # forked while another thread held it waits for that thread forever.
    return int(ctypes.PyDLL(None, use_errno=True).fork())


def _run_in_child(fork: Callable[[], int], fn: Callable[[], str], limit: float) -> str:
    """``fn()`` run in a child made by ``fork``: its text, or what became of the child.

    ``raised <type>: <message>`` when ``fn`` raised, ``hung: ...`` when the child was
    killed after ``limit`` seconds, ``died: ...`` when it ended without a word.
    """
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # os.fork, 3.12+: with threads
        pid = fork()
    if pid == 0:  # the child: send the text, and leave without pytest's exit
        try:
            try:
                data = str(fn()).encode()
            except BaseException as exc:
                data = f"raised {type(exc).__name__}: {exc}".encode(errors="replace")
            os.write(write, data)
        finally:
            os._exit(0)
    assert pid > 0
    os.close(write)
    chunks: list[bytes] = []
    reaped = False
    try:
        end = time.monotonic() + limit
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while (left := end - time.monotonic()) > 0 and select.select([pipe], [], [], left)[0]:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            else:  # a child that hangs is killed, and the test told so
                return f"hung: no answer from the forked child in {limit} s"
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        if not reaped:  # hung, or this process interrupted: no child outlives the test
            _kill(pid)
    if not chunks:
        code = os.waitstatus_to_exitcode(status)
        return f"died: the forked child ended without a word (exit {code})"
    return b"".join(chunks).decode()


def _kill(pid: int) -> None:
    """SIGKILL ``pid`` (and its process group, when it leads one) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:  # a fresh fork: what it forked in turn goes with it
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _fresh() -> int:
    global _fresh_pid
    pid = os.fork()
    if pid == 0:
        _fresh_pid = os.getpid()
        os.setpgid(0, 0)  # a group of its own, killed whole
    else:
        with contextlib.suppress(OSError):  # both sides set it: no race with a kill
            os.setpgid(pid, pid)
    return pid


def in_a_fresh_fork(scenario: Callable[[], str]) -> str:
    """``scenario()`` run in a child of ``os.fork()`` (one thread): its text, or its error."""
    # Longer than a C-forked child's limit: a hang in there is reported from in there.
    return _run_in_child(_fresh, scenario, CHILD_LIMIT + 15)


def in_child_of(fork: Callable[[], int], fn: Callable[[], str]) -> str:
    """``fn()`` run in a child made by ``fork`` (``os.fork`` or :func:`c_fork`): its text."""
    return _run_in_child(fork, fn, CHILD_LIMIT)


def in_c_forked_child(fn: Callable[[], str]) -> str:
    """``fn()`` run in a child made by :func:`c_fork`: its text, or the error it raised."""
    return in_child_of(c_fork, fn)
