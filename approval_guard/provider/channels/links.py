"""Signed one-click links: a token bound to one item, request, reviewer, identity, action, expiry.

A token is ``v1.<payload>.<mac>``: the payload (base64url of canonical JSON)
names the mail (its id is the link's single-use key, shared by the mail's
approve and deny links), the request, the reviewer's credential id, the
address the mail went to, the action and the request's deadline; the mac is
HMAC-SHA256 over it with the database's link secret. :func:`read_token`
refuses anything else with a :class:`LinkRefused` whose ``status`` and
message the pages show; a token never appears in one, nor in a repr or log.

Each channel signs with its own ``context`` (email's is the default), so a
token made for one channel's links decides nothing through another's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from datetime import datetime

import attrs

from approval_guard._codec.exact_json import InvalidJSON, canonical_json, load_json
from approval_guard._codec.wire import APPROVED, DENIED
from approval_guard.exceptions import ProviderError
from approval_guard.provider.store.sql.base import from_us, to_us

APPROVE = "approve"
DENY = "deny"
#: A link's action -> the decision it records.
DECISIONS = {APPROVE: APPROVED, DENY: DENIED}
#: The longest token accepted (real ones are about 300 characters).
MAX_TOKEN = 2048
_VERSION = "v1"
#: The email links' context (the first channel to have links).
EMAIL_CONTEXT = b"approval-guard email link v1."
_SHAPE = re.compile(r"v1\.([A-Za-z0-9_-]{1,1800})\.([A-Za-z0-9_-]{43})")
_FIELDS = {"m": str, "r": str, "v": str, "t": str, "a": str, "e": int}


class LinkRefused(ProviderError):
    """A link that decides nothing: ``status`` (400, 403, 409, 410) and a sentence why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@attrs.frozen
class Link:
    """What a valid token says (the token itself is never kept)."""

    mail_id: str
    request_id: str
    reviewer_id: str
    address: str
    action: str
    expires_at: datetime

    @property
    def decision(self) -> str:
        """``"approved"`` or ``"denied"``."""
        return DECISIONS[self.action]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, payload: str, context: bytes) -> bytes:
    return hmac.new(secret, context + payload.encode("ascii"), hashlib.sha256).digest()


def make_token(secret: bytes, link: Link, *, context: bytes = EMAIL_CONTEXT) -> str:
    """The token of ``link``, signed with the database's link secret for ``context``."""
    if link.action not in DECISIONS:
        raise ValueError(f"a link's action is approve or deny, not {link.action!r}")
    body = {
        "m": link.mail_id,
        "r": link.request_id,
        "v": link.reviewer_id,
        "t": link.address,
        "a": link.action,
        "e": to_us(link.expires_at),
    }
    payload = _b64(canonical_json(body).encode("utf-8"))
    return f"{_VERSION}.{payload}.{_b64(_mac(secret, payload, context))}"


_INVALID = "this link is not valid: it is incomplete or was altered (copy the whole link)"


def read_token(
    secret: bytes,
    token: object,
    *,
    request_id: str,
    now: datetime,
    context: bytes = EMAIL_CONTEXT,
) -> Link:
    """The link a token carries, if it is genuine, for ``request_id``, and not expired.

    :class:`LinkRefused` otherwise: 400 for a malformed, altered or foreign
    token (one for another request), 410 once the request's deadline passed.
    """
    if not isinstance(token, str) or len(token) > MAX_TOKEN:
        raise LinkRefused(400, _INVALID)
    shape = _SHAPE.fullmatch(token)
    if shape is None:
        raise LinkRefused(400, _INVALID)
    payload, mac = shape.groups()
    try:
        given = _unb64(mac)
    except (binascii.Error, ValueError):
        raise LinkRefused(400, _INVALID) from None
    if not hmac.compare_digest(given, _mac(secret, payload, context)):
        raise LinkRefused(400, _INVALID)
    try:
        body = load_json(_unb64(payload).decode("utf-8"))
    except (binascii.Error, ValueError, InvalidJSON, UnicodeDecodeError):
        raise LinkRefused(400, _INVALID) from None
    if (
        not isinstance(body, dict)
        or set(body) != set(_FIELDS)
        or not all(isinstance(body[key], kind) for key, kind in _FIELDS.items())
        or body["a"] not in DECISIONS
    ):
        raise LinkRefused(400, _INVALID)
    if body["r"] != request_id:
        raise LinkRefused(400, "this link is for another request; it decides nothing here")
    expires = from_us(int(body["e"]))
    assert expires is not None
    if now >= expires:
        raise LinkRefused(410, "this link has expired: the request's time for a decision is over")
    return Link(
        mail_id=body["m"],
        request_id=body["r"],
        reviewer_id=body["v"],
        address=body["t"],
        action=body["a"],
        expires_at=expires,
    )
