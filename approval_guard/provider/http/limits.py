"""The provider's limits and fixed names: what docs/provider-api.md caps, and the page's headers."""

from __future__ import annotations

import re
from pathlib import Path

from approval_guard._codec.exact_json import MAX_JSON_DEPTH

#: Request bodies larger than this are refused with 413.
MAX_BODY_BYTES = 64 * 1024
#: A request head (request line and headers) larger than this is refused with 400.
MAX_HEAD_BYTES = 16 * 1024
#: The local provider's cap on ``wait`` (seconds), as docs/provider-api.md says.
DEFAULT_POLL_CAP = 60.0
#: Limits of the create body, from docs/provider-api.md.
MAX_TOOL_CHARS = 200
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 24 * 3600
MAX_NOTE_CHARS = 10_000
MAX_LIST = 1000
DEFAULT_VALID_FOR_SECONDS = 300

#: An idle keep-alive connection is closed after this many seconds.
KEEP_ALIVE_SECONDS = 15
#: A client must send a whole request head, and then its whole body, within this many seconds.
SLOW_CLIENT_SECONDS = 20.0
#: On a graceful shutdown, how long answers in flight may take before they are cut.
GRACEFUL_SECONDS = 10.0

SESSION_COOKIE = "ag_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_PLACEHOLDER = "{{CSRF_TOKEN}}"
STATIC_DIR = Path(__file__).parents[1] / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HTML_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
STATIC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,100}")
IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")
CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")
#: A token in a query string (the review page's login link), for scrubbing log lines.
TOKEN_IN_TEXT = re.compile(r"(token=)[^&\s\"]*", re.IGNORECASE)


def scrub(text: str) -> str:
    """``text`` with any ``token=...`` value replaced, fit for a log line."""
    return TOKEN_IN_TEXT.sub(r"\1<redacted>", text)


#: How deep a body may nest: one level more than the arguments may (the body holds them).
MAX_JSON_BODY_DEPTH = MAX_JSON_DEPTH + 1
