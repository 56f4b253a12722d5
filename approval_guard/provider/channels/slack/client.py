"""Calling Slack's Web API with ``slack_sdk.WebClient``: one call, one :class:`Answer`, no raise.

The client is made with the settings' ``base_url`` (a local fake Slack in
tests) and no retry handlers of its own: the outbox decides when to try again
(honouring a ``429``'s ``Retry-After``). Blocking: callers run it in the
thread pool. An answer never holds the token; an error is Slack's error code
(``ratelimited``, ``channel_not_found``) or the exception's type.

The outbox's posts and updates use :func:`call_async` instead: an ``httpx``
call on the event loop, which the outbox's deadline can cut (a thread's
``urllib`` read cannot be: a server answering a byte at a time would keep it
open past its lease, and the item would be posted again while it is).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import attrs

from approval_guard.provider.channels.slack.settings import SlackSettings

if TYPE_CHECKING:
    import httpx
    from slack_sdk import WebClient

#: Seconds one Web API call may take.
CALL_TIMEOUT = 10
#: The SDK's own logger: warnings and errors only (its debug lines hold whole bodies).
_sdk_logger = logging.getLogger("approval_guard.provider.channels.slack.sdk")
_sdk_logger.setLevel(logging.WARNING)


@attrs.frozen
class Answer:
    """What one call gave: ``ok``, the HTTP status, Slack's error, ``Retry-After``, the data."""

    ok: bool
    status: int | None
    error: str | None = None
    retry_after: float | None = None
    data: dict[str, Any] = attrs.field(factory=dict, repr=False)


def make_client(settings: SlackSettings, *, timeout: int = CALL_TIMEOUT) -> WebClient:
    """A ``WebClient`` for the settings' app and API URL, without retries of its own."""
    from slack_sdk import WebClient

    return WebClient(
        token=settings.bot_token,
        base_url=settings.api_url,
        timeout=timeout,
        retry_handlers=[],
        logger=_sdk_logger,
    )


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    for name, value in dict(headers).items():
        if str(name).lower() == "retry-after":
            raw = value[0] if isinstance(value, (list, tuple)) and value else value
            try:
                seconds = float(str(raw).strip())
            except ValueError:
                return None
            return seconds if 0 <= seconds <= 24 * 3600 else None
    return None


def call(client: WebClient, method: str, **arguments: Any) -> Answer:
    """``client.chat_postMessage(**arguments)`` for ``"chat.postMessage"`` (and so on).

    Its answer, never an exception.
    """
    from slack_sdk.errors import SlackApiError

    try:
        response = getattr(client, method.replace(".", "_"))(**arguments)
    except SlackApiError as exc:
        response = exc.response
    except Exception as exc:  # connection refused, timeout, a body that is not JSON
        return Answer(ok=False, status=None, error=type(exc).__name__)
    return _answer(int(response.status_code), response.data, response.headers)


async def call_async(
    http: httpx.AsyncClient, settings: SlackSettings, method: str, **arguments: Any
) -> Answer:
    """:func:`call`'s answer for one Web API method, sent with ``http`` (JSON, as the SDK does).

    Never raises but for cancellation (the outbox's deadline); never holds the token.
    """
    import httpx

    try:
        response = await http.post(
            settings.api_url + method,
            content=json.dumps(arguments).encode("utf-8"),
            headers={
                "Authorization": f"Bearer {settings.bot_token}",
                "Content-Type": "application/json;charset=utf-8",
            },
        )
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
    except httpx.HTTPError as exc:  # connection refused, timed out, cut off
        return Answer(ok=False, status=None, error=type(exc).__name__)
    return _answer(status, data, response.headers)


def _answer(status: int, data: object, headers: Any) -> Answer:
    """The :class:`Answer` of a Web API response, however it was sent."""
    body = data if isinstance(data, dict) else {}
    ok = status == 200 and body.get("ok") is True
    error = None if ok else str(body.get("error") or f"HTTP {status}")[:100]
    return Answer(
        ok=ok,
        status=status,
        error=error,
        retry_after=_retry_after(headers) if status == 429 else None,
        data=body,
    )
