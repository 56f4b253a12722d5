"""Signing and verifying deliveries (Standard Webhooks), and targets that hide their secret."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from approval_guard.provider.channels.webhooks.signing import (
    WebhookSignatureError,
    WebhookTarget,
    new_secret,
    parse_secret,
    sign,
    verify,
)

SECRET = new_secret()


def test_sign_matches_the_standard_webhooks_test_vector() -> None:
    """The spec's published example signs to the spec's published signature."""
    key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert expected == sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)


def _signed(secret: str, body: bytes, *, at: int) -> dict[str, str]:
    return {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": str(at),
        "Webhook-Signature": "v1,bm90IGl0 " + sign(parse_secret(secret), "msg_1", at, body),
    }


def test_verify_accepts_a_good_signature_among_several() -> None:
    """Headers in any case; one matching entry of a space-separated list is enough."""
    body = b'{"type":"request.created"}'
    verify(SECRET, _signed(SECRET, body, at=1_700_000_000), body, now=1_700_000_100)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda h, b: (h, b + b" "), "changed body"),
        (lambda h, b: ({**h, "Webhook-Id": "msg_2"}, b), "another id"),
        (lambda h, b: ({**h, "Webhook-Timestamp": "1700000001"}, b), "another timestamp"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "Webhook-Signature"}, b), "unsigned"),
    ],
)
def test_verify_refuses_a_tampered_delivery(change: Any, why: str) -> None:
    """Any change to the id, timestamp or body, or no signature at all, fails to verify."""
    body = b'{"type":"request.created"}'
    headers, sent = change(_signed(SECRET, body, at=1_700_000_000), body)
    with pytest.raises(WebhookSignatureError):
        verify(SECRET, headers, sent, now=1_700_000_000)


def test_verify_refuses_another_secret_and_an_old_timestamp() -> None:
    """A wrong key, or a timestamp beyond the tolerance either way, fails."""
    body = b"{}"
    headers = _signed(SECRET, body, at=1_700_000_000)
    with pytest.raises(WebhookSignatureError):
        verify(new_secret(), headers, body, now=1_700_000_000)
    for now in (1_700_000_301, 1_699_999_699):
        with pytest.raises(WebhookSignatureError, match="too far"):
            verify(SECRET, headers, body, now=now)


@pytest.mark.parametrize(
    "text",
    ["", "whsec_", "whsec_not base64!", "sk_" + base64.b64encode(b"k" * 32).decode(), "whsec_a2V5"],
)
def test_a_malformed_secret_is_refused_without_quoting_it(text: str) -> None:
    """No prefix, not base64, or a key under 16 bytes: ValueError, the text not in it."""
    with pytest.raises(ValueError) as caught:
        parse_secret(text)
    assert text[6:] == "" or text[6:] not in str(caught.value)


def test_a_target_hides_its_secret_and_checks_its_url() -> None:
    """repr shows '***' and no query string; a non-http(s) URL or unknown format is refused."""
    key = parse_secret(SECRET)
    target = WebhookTarget("https://user:pw@hooks.example.com/x?token=abc", key)
    shown = repr(target)
    assert "***" in shown and SECRET[6:] not in shown and repr(key) not in shown
    assert "pw" not in shown and "abc" not in shown
    for url in ("ftp://hooks.example.com/", "hooks.example.com/x", "http:///x"):
        with pytest.raises(ValueError):
            WebhookTarget(url, key)
    with pytest.raises(ValueError):
        WebhookTarget("https://hooks.example.com/", key, "teams")
