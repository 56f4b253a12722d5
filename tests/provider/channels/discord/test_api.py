"""Discord's REST API as the channel calls it, against a fake Discord over real HTTP."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from approval_guard.provider.channels.base import Permanent, Retry, Sent
from approval_guard.provider.channels.discord.api import Answer, DiscordApi, result
from approval_guard.provider.channels.discord.settings import DiscordSettings
from tests.support.fake_discord import CHANNEL, RATE_LIMITED, TOKEN, UNAUTHORIZED, FakeDiscord

BODY = {"content": "hello", "embeds": [], "components": [], "allowed_mentions": {"parse": []}}


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


def api_for(discord: FakeDiscord, *, token: str = TOKEN, url: str | None = None) -> DiscordApi:
    settings = DiscordSettings(
        bot_token=token,
        public_key=discord.public_key,
        channel=CHANNEL,
        api_url=url or discord.api_url,
    )
    return DiscordApi(settings, timeout=5.0)


def run(api: DiscordApi, *calls: tuple[str, str | None]) -> list[Answer]:
    async def go() -> list[Answer]:
        try:
            out = []
            for method, message in calls:
                if method == "create":
                    out.append(await api.create_message(CHANNEL, BODY))
                else:
                    assert message is not None
                    out.append(await api.edit_message(CHANNEL, message, {**BODY, "content": "x"}))
            return out
        finally:
            await api.close()

    return asyncio.run(go())


def test_create_and_edit_speak_discords_rest_api(discord: FakeDiscord) -> None:
    """POST then PATCH the message, with ``Authorization: Bot TOKEN`` and JSON bodies."""
    (created,) = run(api_for(discord), ("create", None))
    assert created.ok and isinstance(result(created, what="posting"), Sent)
    message_id = str(created.data["id"])
    (edited,) = run(api_for(discord), ("edit", message_id))
    assert edited.ok
    post, patch = discord.calls
    assert (post.method, post.path) == ("POST", f"/api/v10/channels/{CHANNEL}/messages")
    assert (patch.method, patch.path) == (
        "PATCH",
        f"/api/v10/channels/{CHANNEL}/messages/{message_id}",
    )
    assert post.headers["authorization"] == f"Bot {TOKEN}"
    assert post.headers["user-agent"].startswith("DiscordBot (")
    assert post.body == BODY
    assert discord.messages[message_id]["content"] == "x"


def test_a_429_is_retried_after_discords_retry_after(discord: FakeDiscord) -> None:
    """``429`` with ``retry_after`` 0.25: retry after 0.25 s (the header's 1 s as a fallback)."""
    discord.script.append(RATE_LIMITED)
    (answer,) = run(api_for(discord), ("create", None))
    assert result(answer, what="posting") == Retry(
        "Discord rate-limited posting (HTTP 429: You are being rate limited.)", after=0.25
    )
    discord.script.append((429, {"message": "slow down"}, {"Retry-After": "3"}))
    (answer,) = run(api_for(discord), ("create", None))
    verdict = result(answer, what="posting")
    assert isinstance(verdict, Retry) and verdict.after == 3.0


def test_server_errors_and_no_answer_are_retried(discord: FakeDiscord) -> None:
    """A 5xx, a refused connection: retried with the outbox's backoff."""
    discord.down = True
    (answer,) = run(api_for(discord), ("create", None))
    verdict = result(answer, what="posting")
    assert isinstance(verdict, Retry) and verdict.after is None and "502" in verdict.reason
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    (answer,) = run(api_for(discord, url=f"http://127.0.0.1:{port}/api/v10"), ("create", None))
    verdict = result(answer, what="posting")
    assert answer.status is None and isinstance(verdict, Retry) and verdict.after is None


def test_a_bad_token_is_permanent_and_never_quoted(discord: FakeDiscord) -> None:
    """``401``: given up at once; the reason names the token's refusal, never the token."""
    wrong = "wrong-token-" + "z" * 30
    (answer,) = run(api_for(discord, token=wrong), ("create", None))
    verdict = result(answer, what="posting")
    assert answer.status == 401 and isinstance(verdict, Permanent)
    assert "token" in verdict.reason and wrong not in verdict.reason and wrong not in repr(answer)
    discord.script.append(UNAUTHORIZED)
    (answer,) = run(api_for(discord), ("create", None))
    assert isinstance(result(answer, what="posting"), Permanent)


def test_an_unknown_message_or_a_missing_permission_is_permanent(discord: FakeDiscord) -> None:
    """``404 Unknown Message`` on an edit and ``403 Missing Access`` are given up at once."""
    (answer,) = run(api_for(discord), ("edit", "1400000000000000999"))
    verdict = result(answer, what="editing")
    assert answer.status == 404 and isinstance(verdict, Permanent)
    assert "Unknown Message" in verdict.reason
    discord.script.append((403, {"message": "Missing Access", "code": 50001}, {}))
    (answer,) = run(api_for(discord), ("create", None))
    verdict = result(answer, what="posting")
    assert isinstance(verdict, Permanent) and "Missing Access" in verdict.reason
