"""Forking as C code does (uWSGI's workers): fork(2) itself, no ``os.register_at_fork`` hook."""

from __future__ import annotations

import ctypes
import os
import warnings
from collections.abc import Callable


def c_fork() -> int:
    """fork(2) called directly: the child runs none of Python's at-fork hooks."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: forking with threads
        return int(ctypes.CDLL(None, use_errno=True).fork())


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
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text
