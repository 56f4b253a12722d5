"""The test helpers' own HTTP servers: a listen queue long enough for a burst, served from a
thread that stops as soon as it is told.

``socketserver`` listens with a queue of 5 connections: a test opening 64 at once
on a loaded machine overflowed it, the kernel dropped the connection attempts past
it and the clients sent theirs again a second later (a create timed out).

``socketserver``'s ``serve_forever`` looks at its shutdown flag once every
``poll_interval`` seconds, half a second by default, so each ``shutdown()``
waited up to that long: several hundred tests paid it in their teardown.
"""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer

#: Seconds between two looks at the shutdown flag.
POLL_INTERVAL = 0.02


class BurstServer(ThreadingHTTPServer):
    """A threading HTTP server whose listen queue holds a burst; its threads never block exit."""

    request_queue_size = 1024
    daemon_threads = True


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Serve ``server`` from a daemon thread, started; ``server.shutdown()`` stops it at once."""
    thread = threading.Thread(target=server.serve_forever, args=(POLL_INTERVAL,), daemon=True)
    thread.start()
    return thread


def wait_on(lock: threading.Condition, holds: Callable[[], bool], timeout: float) -> bool:
    """Block until ``holds()`` (asked under ``lock``, on each notify); False at ``timeout``."""
    end = time.monotonic() + timeout
    with lock:
        while not holds():
            left = end - time.monotonic()
            if left <= 0:
                return False
            lock.wait(min(left, 0.1))
    return True
