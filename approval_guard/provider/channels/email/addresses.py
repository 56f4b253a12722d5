"""Email addresses and mail recipients as accepted: ``alice@example.com``, ``role:payments``.

Pure checks, shared by the CLI (``reviewers add --email``, ``serve
--email-to``), the rules file (``email_to``) and the store. An address is kept
lower-cased: it is compared to find a reviewer, never used to log in. Only a
plain ``local@domain`` is accepted (no display name, no comment, no list), so
an address can never smuggle a second recipient or a header into a mail.
"""

from __future__ import annotations

import re

from approval_guard.exceptions import ProviderError

#: The longest address accepted (RFC 5321's path limit).
MAX_ADDRESS = 254
#: ``role:NAME`` in a recipient list: every reviewer with that role and an address.
ROLE_PREFIX = "role:"

_LOCAL = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = re.compile(rf"{_LOCAL}@{_LABEL}(?:\.{_LABEL})*")
_ROLE = re.compile(r"[^\s]{1,64}")


class AddressError(ProviderError, ValueError):
    """An address or recipient the provider refuses; the message says what is accepted."""


def check_address(text: object) -> str:
    """A plain ``local@domain`` address, lower-cased; :class:`AddressError` for anything else."""
    if (
        not isinstance(text, str)
        or not 3 <= len(text) <= MAX_ADDRESS
        or not text.isascii()
        or not _ADDRESS.fullmatch(text)
    ):
        raise AddressError(
            "an email address must be a plain local@domain address "
            f"(ASCII, at most {MAX_ADDRESS} characters, no name or angle brackets)"
        )
    return text.lower()


def check_recipient(text: object) -> str:
    """An address (lower-cased) or ``role:NAME``; :class:`AddressError` for anything else."""
    if isinstance(text, str) and text.startswith(ROLE_PREFIX):
        role = text[len(ROLE_PREFIX) :]
        if not _ROLE.fullmatch(role) or not role.isprintable():
            raise AddressError(
                "a role recipient is role:NAME, NAME 1 to 64 printable characters without spaces"
            )
        return text
    try:
        return check_address(text)
    except AddressError:
        raise AddressError(
            "a recipient is a reviewer's email address (local@domain) or role:NAME"
        ) from None


def role_of(recipient: str) -> str | None:
    """The role a ``role:NAME`` recipient names, or None for an address."""
    return recipient[len(ROLE_PREFIX) :] if recipient.startswith(ROLE_PREFIX) else None
