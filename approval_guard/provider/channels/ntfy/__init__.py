"""ntfy: each new request pushed to its reviewers' phones, with Approve and Deny buttons.

``approval-guard serve --ntfy-url https://ntfy.sh`` (an access token from
``APPROVAL_GUARD_NTFY_TOKEN``) and ``approval-guard reviewers link NAME
--ntfy-topic TOPIC``; see docs/ntfy.md.
"""

from approval_guard.provider.channels.ntfy.kind import NtfyKind
from approval_guard.provider.channels.ntfy.settings import NtfySettings

__all__ = ["NtfyKind", "NtfySettings"]
