"""Forking as C code does (uWSGI's workers): fork(2) itself, no ``os.register_at_fork`` hook."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
import warnings
from collections.abc import Callable

#: Seconds a forked child has to answer.
CHILD_LIMIT = 30.0


def c_fork() -> int:
    """fork(2) called directly: the child runs none of Python's at-fork hooks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: forking with threads
        # PyDLL: the GIL stays held across fork(2). CDLL would release it, and a child
        # forked while another thread held it waits for that thread forever.
        return int(ctypes.PyDLL(None, use_errno=True).fork())


def in_c_forked_child(fn: Callable[[], str]) -> str:
    """``fn()`` run in a child made by :func:`c_fork`: its text, or the error it raised."""
    read, write = os.pipe()
    pid = c_fork()
    if pid == 0:  # the child: send the text, and leave without pytest's exit
        try:
            try:
                text = fn()
            except BaseException as exc:
                text = f"raised {type(exc).__name__}: {exc}"
            os.write(write, text.encode())
        finally:
            os._exit(0)
    assert pid > 0
    os.close(write)
    # A child forked with another thread holding a lock it needs waits forever (the
    # hazard of forking a threaded process): it is killed, and the test told so.
    chunks: list[bytes] = []
    end = time.monotonic() + CHILD_LIMIT
    with os.fdopen(read, "rb", buffering=0) as pipe:
        while (left := end - time.monotonic()) > 0 and select.select([pipe], [], [], left)[0]:
            chunk = pipe.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return f"hung: no answer from the forked child in {CHILD_LIMIT} s"
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()
