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
        if REDACTED_KEY in value:
            return True
        items: Any = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return False
    # A loop, not any() of a generator: this runs on every call's arguments.
    for item in items:  # noqa: SIM110
        if isinstance(item, _CONTAINERS) and holds_marker_key(item):
            return True
    return False


_CONTAINERS = (dict, list, tuple)
