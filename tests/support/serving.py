"""The test helpers' own HTTP servers, served from a thread that stops as soon as it is told.

``socketserver``'s ``serve_forever`` looks at its shutdown flag once every
``poll_interval`` seconds, half a second by default, so each ``shutdown()``
waited up to that long: several hundred tests paid it in their teardown.
"""

from __future__ import annotations

import socketserver
import threading

#: Seconds between two looks at the shutdown flag.
POLL_INTERVAL = 0.02


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Serve ``server`` from a daemon thread, started; ``server.shutdown()`` stops it at once."""
    thread = threading.Thread(target=server.serve_forever, args=(POLL_INTERVAL,), daemon=True)
    thread.start()
    return thread
