"""Provider text made safe to quote: anything shaped like a credential scrubbed, bounded.

:func:`scrub_text` replaces anything *shaped* like a credential (an
``Authorization`` value, ``"token": "..."``); :func:`safe_text` also drops
control characters and cuts the text to a limit.
"""

from __future__ import annotations

import re

# What an Authorization value looks like wherever it is echoed: a header or a
# key (`Authorization: ...`, `"token": "..."`) and everything up to the end of
# its field, or an auth scheme followed by something shaped like a credential
# (8+ token68 characters, not all lower-case letters, so "Token provided" stays).
_SECRET_SHAPED = re.compile(
    r"""
    (\b(?:proxy-)?authori[sz]ation|\b(?:access[-_]|api[-_]|auth[-_]|refresh[-_]|id[-_])?token
     |\bcredentials?|\bpassword|\bpasswd|\bsecret|\bapi[-_]?key)
    (["']?\s*[:=]\s*["']?)
    (?:[A-Za-z]+[ \t]+)?[^\s"',;&}\]]+
    |
    \b(bearer|basic|token|digest|negotiate|apikey)(\s+)
    (?-i:(?=[a-z]*[A-Z0-9._~+/=-]))[A-Za-z0-9._~+/=-]{8,}
    """,
    # ASCII: an echoed header is ASCII, and the client's cheap pre-check (a
    # search for SECRET_WORDS) must see every text this could match.
    re.ASCII | re.IGNORECASE | re.VERBOSE,
)


#: Every text _SECRET_SHAPED matches holds one of these, lower-cased.
SECRET_WORDS = (
    "authori",
    "token",
    "credential",
    "password",
    "passwd",
    "secret",
    "apikey",
    "api-key",
    "api_key",
    "bearer",
    "basic",
    "digest",
    "negotiate",
)


def _redact(match: re.Match[str]) -> str:
    name, sep, scheme, space = match.groups()
    return f"{name}{sep}***" if name is not None else f"{scheme}{space}***"


def scrub_text(text: str) -> str:
    """Replace anything shaped like an ``Authorization`` value or a credential by ``***``."""
    return _SECRET_SHAPED.sub(_redact, text)


def safe_text(text: str, limit: int) -> str:
    """Provider text fit to quote: secret-shaped parts scrubbed, no control characters, bounded."""
    # Scrubbed before it is cut, so that no secret is cut into a prefix the
    # patterns no longer recognise; cut to a window first to bound the work.
    text = text[: 4 * limit + 200]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    text = scrub_text(text)
    return text if len(text) <= limit else text[:limit] + "..."
