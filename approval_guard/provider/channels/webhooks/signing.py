"""Outgoing webhooks' identity and signature: targets, secrets, Standard Webhooks signing.

A target is where the provider posts its events (:class:`WebhookTarget`). A
secret is ``whsec_`` + base64(key), as the Standard Webhooks spec
(https://www.standardwebhooks.com/) writes it; each delivery carries three
headers:

- ``webhook-id``: ``msg_<random>``, one per event and target, the same on every
  retry (a receiver drops one it has seen);
- ``webhook-timestamp``: when this attempt was sent, in unix seconds;
- ``webhook-signature``: ``v1,`` + base64(HMAC-SHA256(key, f"{id}.{timestamp}." + body)),
  only when the target has a secret.

A receiver verifies a delivery with :func:`verify` (or any Standard Webhooks
library), in these steps:

1. strip ``whsec_`` from the secret and base64-decode the rest: that is the key;
2. refuse a ``webhook-timestamp`` more than ``tolerance`` seconds (300) from its
   own clock, before or after (a replay);
3. compute ``v1,`` + base64(HMAC-SHA256(key, f"{webhook-id}.{webhook-timestamp}." +
   raw body bytes)), on the body exactly as received, not parsed and re-encoded;
4. accept if it equals, compared in constant time, any of the space-separated
   entries of ``webhook-signature``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import attrs

from approval_guard.exceptions import ProviderError

SECRET_PREFIX = "whsec_"
#: The body formats a target can ask for.
FORMATS = ("standard", "slack")
#: How far a receiver lets ``webhook-timestamp`` be from its clock, in seconds.
TOLERANCE = 300


class WebhookSignatureError(ProviderError, ValueError):
    """A delivery did not verify (its message never holds the secret)."""


def parse_secret(text: str) -> bytes:
    """The key of a ``whsec_<base64>`` secret; ``ValueError`` (without the secret) if malformed.

    >>> parse_secret("whsec_" + base64.b64encode(b"0123456789abcdef").decode())
    b'0123456789abcdef'
    """
    if not isinstance(text, str) or not text.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret is {SECRET_PREFIX!r} + base64 of a key")
    try:
        key = base64.b64decode(text[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is whsec_ + base64 of a key: not base64") from None
    if len(key) < 16:
        raise ValueError("a webhook secret's key must be at least 16 bytes (24 to 64 is usual)")
    return key


def new_secret() -> str:
    """A fresh ``whsec_`` secret with a 32-byte random key."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def new_msg_id() -> str:
    """A message id, ``msg_`` + 24 random base32 characters."""
    return "msg_" + base64.b32encode(secrets.token_bytes(15)).decode("ascii").lower()


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,`` + base64(HMAC-SHA256(key, "id.ts." + body))."""
    signed = f"{msg_id}.{int(timestamp)}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verify(
    secret_text: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: int = TOLERANCE,
    now: float | None = None,
) -> None:
    """Check a delivery's signature, as a receiver must; :class:`WebhookSignatureError` if not.

    ``headers`` is looked up case-insensitively; ``body`` is the raw bytes
    received. ``now`` (unix seconds) defaults to the system clock.

    ::

        verify(os.environ["WEBHOOK_SECRET"], request.headers, await request.body())
    """
    key = parse_secret(secret_text)
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature")
    if not msg_id or not stamp or not signatures:
        raise WebhookSignatureError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookSignatureError("webhook-timestamp is not unix seconds") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookSignatureError("webhook-timestamp is too far from now (a replay?)")
    expected = sign(key, msg_id, timestamp, body)
    for candidate in signatures.split(" "):
        if hmac.compare_digest(candidate.strip().encode(), expected.encode()):
            return
    raise WebhookSignatureError("no webhook-signature matches")


def display_url(url: str) -> str:
    """A target URL fit for logs and listings: its host and first path segment, never more.

    A webhook URL's path may be its secret (a Slack incoming webhook's is), as
    may its user, password and query: they are replaced by a short digest of
    the whole URL, so two targets on one host still tell apart.
    """
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    segments = [segment for segment in parts.path.split("/") if segment]
    shown = f"/{segments[0]}" if segments else "/"
    if len(segments) > 1 or parts.username or parts.password or parts.query:
        digest = hashlib.sha256(url.encode()).hexdigest()[:8]
        shown += f"/…#{digest}" if len(segments) > 1 else f"…#{digest}"
    return urlunsplit((parts.scheme, netloc, "", "", "")) + shown


def check_url(url: str) -> str:
    """``url`` if it is an absolute http(s) URL with a host, else ``ValueError``."""
    if not isinstance(url, str):
        raise ValueError("a webhook URL must be a string")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ValueError("a webhook URL must be an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a webhook URL must be http(s)://HOST/..., not {display_url(url)!r}")
    if any(ch.isspace() for ch in url):
        raise ValueError("a webhook URL must not contain whitespace")
    return url


def _check_format(instance: object, attribute: object, value: str) -> None:
    if value not in FORMATS:
        raise ValueError(f"a webhook format is one of {', '.join(FORMATS)}, not {value!r}")


def _check_secret(instance: object, attribute: object, value: bytes | None) -> None:
    if value is not None and (not isinstance(value, bytes) or len(value) < 16):
        raise ValueError("a webhook secret's key must be bytes, at least 16 of them")


@attrs.frozen(repr=False)
class WebhookTarget:
    """Where events are posted, with the key they are signed with (None: unsigned).

    ::

        WebhookTarget("https://hooks.example.com/approvals", parse_secret(text))
        WebhookTarget("https://hooks.slack.com/services/...", None, "slack")
    """

    url: str = attrs.field(converter=check_url)
    secret: bytes | None = attrs.field(default=None, validator=_check_secret)
    format: str = attrs.field(default="standard", validator=_check_format)

    def __repr__(self) -> str:
        secret = "None" if self.secret is None else "'***'"
        return (
            f"WebhookTarget(url={display_url(self.url)!r}, secret={secret}, format={self.format!r})"
        )
