"""Random ids: version-4 UUID texts, each from its own read of the OS's randomness.

Every answer carries a new ``X-Request-ID`` and every create a new request id.
Each is read from ``os.urandom`` when it is made: bytes read ahead would be
handed out again by a child forked by C code (which runs no at-fork hook), and
a read per id measured no slower than a pool's.
"""

from __future__ import annotations

import os


def new_id() -> str:
    """A random uuid4, as its 36-character text."""
    chunk = bytearray(os.urandom(16))
    # As uuid.UUID(bytes=chunk, version=4) writes it: the version and variant bits set.
    chunk[6] = (chunk[6] & 0x0F) | 0x40
    chunk[8] = (chunk[8] & 0x3F) | 0x80
    h = chunk.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
