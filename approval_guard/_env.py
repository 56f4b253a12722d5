"""The environment: the one place the package reads ``APPROVAL_GUARD_*`` variables, at call time.

Nothing reads the environment at import. The library's default Guard reads
:data:`ENV_URL`, :data:`ENV_CREDENTIAL`, :data:`ENV_HARNESS_LIMIT`,
:data:`ENV_REDACTION_KEY` and :data:`ENV_REQUESTED_BY`
(:func:`default_guard_settings`); the ``approval-guard`` command reads the URL,
the credential and :data:`ENV_REVIEWER_TOKEN` (:func:`read`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from approval_guard.exceptions import ConfigurationError

ENV_URL = "APPROVAL_GUARD_URL"
ENV_CREDENTIAL = "APPROVAL_GUARD_CREDENTIAL"
ENV_HARNESS_LIMIT = "APPROVAL_GUARD_HARNESS_LIMIT"
ENV_REVIEWER_TOKEN = "APPROVAL_GUARD_REVIEWER_TOKEN"
ENV_REDACTION_KEY = "APPROVAL_GUARD_REDACTION_KEY"
#: The person the default Guard's calls are made for (one person's agent, a CLI session).
ENV_REQUESTED_BY = "APPROVAL_GUARD_REQUESTED_BY"
#: ``serve``'s PostgreSQL database (a DSN may hold a password: keep it off the command line).
ENV_SERVE_DSN = "APPROVAL_GUARD_SERVE_DSN"
#: ``serve``'s known credentials for a new database (containers, CI).
ENV_SERVE_INSTANCE_TOKEN = "APPROVAL_GUARD_SERVE_INSTANCE_TOKEN"
ENV_SERVE_REVIEWER_TOKEN = "APPROVAL_GUARD_SERVE_REVIEWER_TOKEN"
#: ``serve``'s Slack app secrets (``--slack-bot-token``, ``--slack-signing-secret``).
ENV_SLACK_BOT_TOKEN = "APPROVAL_GUARD_SLACK_BOT_TOKEN"
ENV_SLACK_SIGNING_SECRET = "APPROVAL_GUARD_SLACK_SIGNING_SECRET"

#: Every variable the package reads, in the order the docs list them.
ENV_NAMES = (
    ENV_URL,
    ENV_CREDENTIAL,
    ENV_HARNESS_LIMIT,
    ENV_REDACTION_KEY,
    ENV_REQUESTED_BY,
    ENV_REVIEWER_TOKEN,
    ENV_SERVE_DSN,
    ENV_SERVE_INSTANCE_TOKEN,
    ENV_SERVE_REVIEWER_TOKEN,
    ENV_SLACK_BOT_TOKEN,
    ENV_SLACK_SIGNING_SECRET,
)

DEFAULT_HARNESS_LIMIT = "35m"


def read(name: str, environ: Mapping[str, str] | None = None, default: str = "") -> str:
    """One variable's value now (``default`` when unset or empty)."""
    env = os.environ if environ is None else environ
    return env.get(name, "") or default


@attrs.frozen(repr=False)
class GuardSettings:
    """The default Guard's settings, as read from the environment (the credential never shown)."""

    base_url: str
    credential: str
    harness_limit: str
    #: Empty: a random key per Guard. Secret: never shown.
    redaction_key: str = ""
    #: Empty: no ``requested_by`` unless ``harness_call`` gives one.
    requested_by: str = ""

    def __repr__(self) -> str:
        return (
            f"GuardSettings(base_url={self.base_url!r}, credential='***', "
            f"harness_limit={self.harness_limit!r}, "
            f"redaction_key={'***' if self.redaction_key else ''!r}, "
            f"requested_by={self.requested_by!r})"
        )


def default_guard_settings(environ: Mapping[str, str] | None = None) -> GuardSettings:
    """The module-level ``requires_approval``'s Guard settings, read now.

    Raises ConfigurationError when the URL or the credential is missing.
    """
    url = read(ENV_URL, environ)
    credential = read(ENV_CREDENTIAL, environ)
    limit = read(ENV_HARNESS_LIMIT, environ, DEFAULT_HARNESS_LIMIT)
    if not url or not credential:
        raise ConfigurationError(
            f"module-level requires_approval needs {ENV_URL} and {ENV_CREDENTIAL} in the "
            "environment (or use a Guard object)"
        )
    return GuardSettings(
        base_url=url,
        credential=credential,
        harness_limit=limit,
        redaction_key=read(ENV_REDACTION_KEY, environ),
        requested_by=read(ENV_REQUESTED_BY, environ),
    )
