"""Checking that a request came from Slack: ``X-Slack-Signature`` over ``v0:timestamp:body``.

``slack_sdk.signature.SignatureVerifier`` does the check (HMAC-SHA256 with the
app's signing secret, compared in constant time, a timestamp more than five
minutes from the provider's clock refused). The headers are checked for shape
first, so nothing a client sends can make the verifier raise. An accepted
request's :func:`replay_digest` lets the store recognise the same signed body
sent again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping

#: How far a request's timestamp may be from the provider's clock (Slack's rule).
MAX_SKEW_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def is_from_slack(
    signing_secret: str, body: bytes, headers: Mapping[str, str], now: Callable[[], float]
) -> bool:
    """True when the body carries the app's valid signature and a timestamp within 5 minutes."""
    from slack_sdk.signature import Clock, SignatureVerifier

    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
        return False

    class _ProviderClock(Clock):
        def now(self) -> float:
            return now()

    verifier = SignatureVerifier(signing_secret, clock=_ProviderClock())
    # The SDK checks the same five minutes; checked here too, so the rule is ours.
    if abs(now() - int(timestamp)) > MAX_SKEW_SECONDS:
        return False
    return bool(verifier.is_valid(body=body, timestamp=timestamp, signature=signature))


def replay_digest(body: bytes, headers: Mapping[str, str]) -> str:
    """What identifies one signed request: sha256 of ``timestamp:body``."""
    timestamp = headers.get("x-slack-request-timestamp", "")
    return hashlib.sha256(timestamp.encode("ascii") + b":" + body).hexdigest()
