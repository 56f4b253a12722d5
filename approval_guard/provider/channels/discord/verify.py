"""Checking that an interaction came from Discord: Ed25519 over ``timestamp + body``.

Discord signs every interaction it posts with the application's key:
``X-Signature-Ed25519`` is the hex signature of the ``X-Signature-Timestamp``
header's bytes followed by the raw body, checked against the application's
public key. The headers are checked for shape first, so nothing a client
sends can make the check raise; a timestamp more than five minutes from the
provider's clock is refused, so an old signed body cannot be sent again later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

#: How far an interaction's timestamp may be from the provider's clock.
MAX_SKEW_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"[0-9a-fA-F]{128}")
INSTALL = "Discord needs the cryptography package: pip install 'approval-guard[discord]'"


def load_key(public_key: str) -> Ed25519PublicKey:
    """The public key (64 hex characters) as an Ed25519 key; ``ValueError`` if it is not one."""
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:  # pragma: no cover - the extra is installed in tests
        raise ValueError(INSTALL) from None
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
    except ValueError:
        raise ValueError("the Discord public key is not an Ed25519 public key") from None


def is_from_discord(
    key: Ed25519PublicKey, body: bytes, headers: Mapping[str, str], now: float
) -> bool:
    """True when ``body`` carries Discord's valid signature and a timestamp within 5 minutes.

    ``headers`` are the request's, names lower-cased; ``now`` the provider's
    clock in epoch seconds.
    """
    from cryptography.exceptions import InvalidSignature

    timestamp = headers.get("x-signature-timestamp", "")
    signature = headers.get("x-signature-ed25519", "")
    if not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
        return False
    if abs(now - int(timestamp)) > MAX_SKEW_SECONDS:
        return False
    try:
        key.verify(bytes.fromhex(signature), timestamp.encode("ascii") + body)
    except InvalidSignature:
        return False
    return True
