"""Discord's REST API as the channel calls it: Create Message and Edit Message, one answer each.

``POST /channels/{channel}/messages`` posts a request's message,
``PATCH /channels/{channel}/messages/{message}`` edits it, both with
``Authorization: Bot TOKEN``. A call never raises: a connection refused or a
timeout is an :class:`Answer` without a status. :func:`result` says what an
answer means for the outbox: ``2xx`` sent; ``429`` (its ``retry_after``, else
``Retry-After``), ``5xx`` and no answer retried; ``401`` (a bad token),
``403`` (no permission in the channel), ``404`` (an unknown channel or
message) and any other ``4xx`` permanent. Nothing here holds the token but
the client's headers: no answer, reason or log line carries it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import httpx

from approval_guard.provider.channels.base import Permanent, Retry, SendResult, Sent
from approval_guard.provider.channels.discord.settings import DiscordSettings

#: The longest wait a ``429`` may ask for that is honoured as asked (seconds).
MAX_RETRY_AFTER = 3600.0


@attrs.frozen
class Answer:
    """What one call gave: the HTTP status (None: no answer), Discord's error, its wait, data."""

    status: int | None
    error: str | None = None
    retry_after: float | None = None
    data: dict[str, Any] = attrs.field(factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True for a ``2xx``."""
        return self.status is not None and 200 <= self.status < 300


def _seconds(value: object) -> float | None:
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


def _answer(response: httpx.Response) -> Answer:
    try:
        decoded = json.loads(response.content) if response.content else {}
    except (ValueError, RecursionError):
        decoded = {}
    data = decoded if isinstance(decoded, dict) else {}
    status = response.status_code
    error = None
    if not 200 <= status < 300:
        message = data.get("message")
        error = f"HTTP {status}" + (f": {str(message)[:100]}" if message else "")
    retry_after = None
    if status == 429:
        retry_after = _seconds(data.get("retry_after"))
        if retry_after is None:
            retry_after = _seconds(response.headers.get("retry-after", ""))
    return Answer(status=status, error=error, retry_after=retry_after, data=data)


class DiscordApi:
    """The bot's calls to the REST API, over one ``httpx.AsyncClient`` made on first use.

    :param settings: the application (its token and API URL).
    :param timeout: seconds one call may take in all.
    """

    def __init__(self, settings: DiscordSettings, *, timeout: float) -> None:
        self._settings = settings
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"DiscordApi(api_url={self._settings.api_url!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers={
                    "Authorization": f"Bot {self._settings.bot_token}",
                    "User-Agent": "DiscordBot (https://pypi.org/project/approval-guard/, 0.1)",
                },
                timeout=self._timeout,
                trust_env=False,
                follow_redirects=False,
            )
        return self._client

    async def call(self, method: str, path: str, body: dict[str, Any]) -> Answer:
        """``method`` ``path`` (under the API URL) with the JSON ``body``; never raises."""
        try:
            response = await self._http().request(method, self._settings.api_url + path, json=body)
        except httpx.HTTPError as exc:  # refused, reset, timed out: no answer
            return Answer(status=None, error=type(exc).__name__)
        return _answer(response)

    async def create_message(self, channel: str, body: dict[str, Any]) -> Answer:
        """Create Message in ``channel``."""
        return await self.call("POST", f"/channels/{channel}/messages", body)

    async def edit_message(self, channel: str, message: str, body: dict[str, Any]) -> Answer:
        """Edit Message ``message`` of ``channel``."""
        return await self.call("PATCH", f"/channels/{channel}/messages/{message}", body)

    async def close(self) -> None:
        """Close the client (a new one is made if a call follows)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def result(answer: Answer, *, what: str) -> SendResult:
    """What ``answer`` means for the outbox; ``what`` names the call (``"posting"``)."""
    if answer.ok:
        return Sent()
    if answer.status is None:
        return Retry(f"Discord did not answer {what} ({answer.error})")
    status = answer.status
    if status == 429:
        return Retry(f"Discord rate-limited {what} ({answer.error})", after=answer.retry_after)
    if status >= 500:
        return Retry(f"Discord failed {what} ({answer.error})")
    if status == 401:
        return Permanent(f"Discord refused the bot token {what} ({answer.error})")
    if status == 403:
        return Permanent(
            f"Discord refused {what}: the bot may not send messages in the channel ({answer.error})"
        )
    if status == 404:
        return Permanent(f"Discord knows no such channel or message {what} ({answer.error})")
    return Permanent(f"Discord refused {what} ({answer.error})")
