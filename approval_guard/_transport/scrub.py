"""Scrubbing secrets out of provider-supplied text before anyone reads it.

Two layers: :func:`scrub_text` replaces anything *shaped* like a credential
(an ``Authorization`` value, ``"token": "..."``); a :class:`Scrubber` also
replaces the one credential it was made with, in every form it may be echoed
in (raw, URL-quoted, base64). :func:`safe_text` makes a text fit to quote.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from typing import Any

__all__ = ["SECRET_WORDS", "Scrubber", "safe_text", "scrub_text"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

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


class Scrubber:
    """Takes the credential (and anything shaped like one) out of provider-supplied text.

    A provider or a gateway in front of it may echo the request's headers in
    an error message or anywhere else; what it sends is shown to a model and
    written to logs, so every string in it is scrubbed before anything reads it.
    Values under the keys in ``keep`` (the echoes that are compared with what
    was sent) are left exactly as they came.
    """

    def __init__(self, credential: str, *, keep: frozenset[str] = frozenset()) -> None:
        self._keep = keep
        quote = urllib.parse.quote
        forms = {credential, quote(credential, safe=""), urllib.parse.quote_plus(credential)}
        raw = credential.encode()
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            forms.add(encoded.decode())
            forms.add(encoded.decode().rstrip("="))
        # Longest first, so that no form is left half-replaced by a shorter one.
        self._forms = tuple(sorted((f for f in forms if f), key=len, reverse=True))

    def __repr__(self) -> str:
        return "Scrubber('***')"

    def text(self, value: str) -> str:
        """``value`` without the credential in any of its forms, nor secret-shaped parts."""
        for form in self._forms:
            if form in value:
                value = value.replace(form, "***")
        return scrub_text(value)

    def body(self, raw: bytes, decoded: Any) -> Any:
        """``decoded`` (the JSON of ``raw``) with every string scrubbed; cheap when clean.

        Without escapes (``\\``) or UTF-16/32 (NUL bytes), each decoded string
        appears verbatim in ``raw``: if no credential form and no secret word is
        there, no string can need scrubbing, and the walk is skipped.
        """
        if b"\\" not in raw and b"\x00" not in raw:
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                pass
            else:
                lowered = text.lower()
                if not any(form in text for form in self._forms) and not any(
                    word in lowered for word in SECRET_WORDS
                ):
                    return decoded
        return self.json(decoded)

    def json(self, value: Any) -> Any:
        """Every string of a decoded body scrubbed, except the values under ``keep``."""
        kind = type(value)
        if kind is str:
            # JSON may escape a lone surrogate (\\ud800): no UTF-8 writer accepts one, and a
            # note or status that cannot be written would make the outcome raise downstream.
            return self.text(_LONE_SURROGATE.sub("\ufffd", value))
        if kind is dict:
            return {
                key: item if key in self._keep else self.json(item) for key, item in value.items()
            }
        if kind is list:
            return [self.json(item) for item in value]
        return value
