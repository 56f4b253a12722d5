"""Random ids (uuid4 texts) drawn from one read of the OS's randomness per 256 ids.

Every answer carries a new ``X-Request-ID`` and every create a new request
id; a read of ``os.urandom`` per id is a system call each, which on a busy
machine costs more than the rest of making the id. The bytes are the same
``os.urandom`` bytes, only read 4 KiB at a time; a forked child starts a pool
of its own, so no two processes ever hand out the same id.
"""

from __future__ import annotations

import os
import threading

#: Ids drawn from one read.
_BATCH = 256

_lock = threading.Lock()
_pool = b""
_at = 0


def _forget() -> None:
    # A new lock too: a thread of the parent may have held it at the fork, and the child
    # has no such thread to let it go.
    global _pool, _at, _lock
    _lock = threading.Lock()
    _pool, _at = b"", 0


os.register_at_fork(after_in_child=_forget)


def new_id() -> str:
    """A random uuid4, as its 36-character text."""
    global _pool, _at
    with _lock:
        if _at + 16 > len(_pool):
            _pool, _at = os.urandom(16 * _BATCH), 0
        chunk = bytearray(_pool[_at : _at + 16])
        _at += 16
    # As uuid.UUID(bytes=chunk, version=4) writes it: the version and variant bits set.
    chunk[6] = (chunk[6] & 0x0F) | 0x40
    chunk[8] = (chunk[8] & 0x3F) | 0x80
    h = chunk.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
