"""Discord's signature on an interaction: Ed25519 over timestamp + body, five minutes of skew."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from approval_guard.provider.channels.discord.verify import (
    MAX_SKEW_SECONDS,
    is_from_discord,
    load_key,
)

NOW = 1_780_000_000
BODY = b'{"type":1,"id":"1500000000000000001"}'


def signed(private: Ed25519PrivateKey, body: bytes, stamp: int) -> dict[str, str]:
    text = str(stamp)
    return {
        "x-signature-timestamp": text,
        "x-signature-ed25519": private.sign(text.encode() + body).hex(),
    }


def key_of(private: Ed25519PrivateKey) -> str:
    return private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def test_discords_signature_is_accepted() -> None:
    """A body signed with the application's private key, timestamp now, is Discord's."""
    private = Ed25519PrivateKey.generate()
    key = load_key(key_of(private))
    assert is_from_discord(key, BODY, signed(private, BODY, NOW), NOW)
    upper = signed(private, BODY, NOW)
    upper["x-signature-ed25519"] = upper["x-signature-ed25519"].upper()
    assert is_from_discord(key, BODY, upper, NOW)


def test_a_changed_body_timestamp_or_key_is_refused() -> None:
    """Any byte of body or timestamp changed, or another key's signature, fails the check."""
    private = Ed25519PrivateKey.generate()
    key = load_key(key_of(private))
    headers = signed(private, BODY, NOW)
    assert not is_from_discord(key, BODY + b" ", headers, NOW)
    moved = {**headers, "x-signature-timestamp": str(NOW + 1)}
    assert not is_from_discord(key, BODY, moved, NOW)
    other = signed(Ed25519PrivateKey.generate(), BODY, NOW)
    assert not is_from_discord(key, BODY, other, NOW)


def test_a_timestamp_more_than_five_minutes_off_is_refused() -> None:
    """Signed correctly but 301 s old or ahead: refused; 300 s is still accepted."""
    private = Ed25519PrivateKey.generate()
    key = load_key(key_of(private))
    for skew in (MAX_SKEW_SECONDS, -MAX_SKEW_SECONDS):
        assert is_from_discord(key, BODY, signed(private, BODY, NOW + skew), NOW)
    for skew in (MAX_SKEW_SECONDS + 1, -MAX_SKEW_SECONDS - 1, 86400):
        assert not is_from_discord(key, BODY, signed(private, BODY, NOW + skew), NOW)


def test_missing_or_malformed_headers_are_refused_without_raising() -> None:
    """No headers, a short or non-hex signature, a non-numeric timestamp: False, never a raise."""
    private = Ed25519PrivateKey.generate()
    key = load_key(key_of(private))
    good = signed(private, BODY, NOW)
    cases = [
        {},
        {"x-signature-timestamp": str(NOW)},
        {"x-signature-ed25519": good["x-signature-ed25519"]},
        {**good, "x-signature-ed25519": good["x-signature-ed25519"][:-2]},
        {**good, "x-signature-ed25519": "zz" + good["x-signature-ed25519"][2:]},
        {**good, "x-signature-timestamp": f" {NOW}"},
        {**good, "x-signature-timestamp": "1e9"},
        {**good, "x-signature-timestamp": "9" * 40},
    ]
    for headers in cases:
        assert not is_from_discord(key, BODY, headers, NOW)
