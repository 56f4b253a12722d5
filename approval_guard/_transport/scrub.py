"""Scrubbing this Guard's credential out of provider-supplied text before anyone reads it.

Two layers: :func:`~approval_guard._codec.safe_text.scrub_text` replaces
anything *shaped* like a credential (an ``Authorization`` value,
``"token": "..."``); a :class:`Scrubber` also replaces the one credential it
was made with, in every form it may be echoed in (raw, URL-quoted, base64).
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from typing import Any

from approval_guard._codec.safe_text import SECRET_WORDS, scrub_text

__all__ = ["Scrubber"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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
