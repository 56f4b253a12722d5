"""The redaction marker, ``{"$redacted": "<12 hex>"}``: how a hidden value is written, and found."""

from __future__ import annotations

from typing import Any

#: The one key of a redaction marker. An argument that holds it is refused.
REDACTED_KEY = "$redacted"


DIGEST_LENGTH = 12


def holds_marker_key(value: Any) -> bool:
    """True if ``value`` holds, at any depth, an object with the ``"$redacted"`` key.

    Deliberately looser than a marker's exact shape: for refusing arguments
    and edits, anything that looks like a marker counts as one. (The guard and
    the provider's store both use this one test.)
    """
    if isinstance(value, dict):
        return REDACTED_KEY in value or any(holds_marker_key(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_marker_key(item) for item in value)
    return False
