"""Each channel as the contract suite drives it: its fake, how it is configured, how a person acts.

A :class:`Driver` runs the channel's local fake (a webhook receiver, a fake
Slack, a real SMTP server, a fake ntfy, a fake Discord), says what the
provider is given to use it, waits for what the channel shows about a
request, and acts as a person would on it (a click, a link, a button). Every
act returns an :class:`Act`: the HTTP status and text the person got, and how
to replay it exactly; ``act(forged=True)`` sends it with its token or signature changed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import attrs
import requests

from approval_guard.provider.channels.discord import DiscordSettings
from approval_guard.provider.channels.discord.channel import DiscordChannel
from approval_guard.provider.channels.discord.message import APPROVE, DENY, custom_id
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.channels.links import Link, make_token
from approval_guard.provider.channels.ntfy import tokens as ntfy_tokens
from approval_guard.provider.channels.ntfy.channel import NtfyChannel
from approval_guard.provider.channels.ntfy.settings import make_settings
from approval_guard.provider.channels.slack.settings import SlackSettings
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from approval_guard.provider.store.protocol import StoreProtocol
from tests.support import fake_discord as discord_clicks
from tests.support.api import wait_for
from tests.support.cli import free_port
from tests.support.fake_discord import CHANNEL as DISCORD_CHANNEL
from tests.support.fake_discord import TOKEN as DISCORD_TOKEN
from tests.support.fake_discord import UNAUTHORIZED as DISCORD_UNAUTHORIZED
from tests.support.fake_discord import FakeDiscord
from tests.support.fake_ntfy import PHONE_AGENT, FakeNtfy, Publish
from tests.support.fake_slack import SIGNING_SECRET, TOKEN, FakeSlack
from tests.support.mail_team import post_decision, token_of
from tests.support.slack_clicks import CHANNEL, block_action, form, post, sign
from tests.support.smtp import Mailbox
from tests.support.webhook_receiver import Receiver


@attrs.define
class Act:
    """What a person's act got back, and the same act again, exactly."""

    status: int
    text: str
    replay: Callable[[], Act]


#: Each person's identity on a channel is made from their name by the driver.
PEOPLE = ("alice", "bob", "carol", "dave")


class Driver:
    """One channel under the contract (see the module's docstring)."""

    name: ClassVar[str] = ""
    #: Whether people act on it (webhooks: nobody clicks).
    acts: ClassVar[bool] = True
    #: Whether an approval counted (one of two) updates what it shows.
    follows: ClassVar[bool] = True
    #: Whether what it sends goes to one person (links bound to them) or to a room.
    per_person: ClassVar[bool] = False

    store: StoreProtocol
    url: str

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        yield self

    def options(self) -> dict[str, Any]:
        """What ``ProviderServer`` is given for this channel."""
        raise NotImplementedError

    def identity(self, person: str) -> str | None:
        """``person``'s identity on it (None: it links nobody)."""
        return None

    def wait_reached(self, request_id: str) -> None:
        """Block until what it shows of a new request arrived (AssertionError otherwise)."""
        raise NotImplementedError

    def wait_updated(self, request_id: str) -> None:
        """Block until it shows one approval of two counted."""
        raise NotImplementedError

    def wait_ended(self, request_id: str, status: str) -> None:
        """Block until it shows the request ``status`` with nothing left to act on."""
        raise NotImplementedError

    def act(self, request_id: str, person: str, status: str, *, forged: bool = False) -> Act:
        """``person`` approves or denies through it (``forged``: its token or signature changed)."""
        raise NotImplementedError

    def act_unknown(self, request_id: str) -> Act:
        """Someone no reviewer is linked to acts through it."""
        raise NotImplementedError

    def wait_reached_person(self, request_id: str, person: str) -> None:
        """Block until what is sent to ``person`` about it arrived (a room's: when it reached)."""
        self.wait_reached(request_id)

    def outage(self, on: bool) -> None:
        """Make its receiver unreachable (or reachable again)."""
        raise NotImplementedError

    def refuse_for_good(self) -> None:
        """Make its receiver refuse the next item for good (a bad token, gone)."""
        raise NotImplementedError

    def deliveries(self) -> int:
        """How many times it was sent something (to show a permanent failure is not retried)."""
        raise NotImplementedError

    def serve_args(self) -> list[str]:
        """The ``approval-guard serve`` flags for this channel."""
        raise NotImplementedError

    def hold(self, on: bool) -> None:
        """Keep its receiver's answers back (a delivery stays in flight), or let them go."""
        raise NotImplementedError

    def wait_in_flight(self) -> None:
        """Block until something reached its receiver and is held there."""
        raise NotImplementedError


def _response(answer: requests.Response) -> tuple[int, str]:
    return answer.status_code, answer.text


class WebhooksDriver(Driver):
    name = "webhooks"
    acts = False
    follows = False

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        with Receiver() as hook:
            self.hook = hook
            yield self

    def options(self) -> dict[str, Any]:
        return {"webhooks": [WebhookTarget(self.hook.url)], "webhook_backoff": 0.05}

    def _types(self, request_id: str) -> list[str]:
        return [
            d.json["type"]
            for d in list(self.hook.deliveries)
            if 200 <= d.status < 300 and d.json["data"]["id"] == request_id
        ]

    def wait_reached(self, request_id: str) -> None:
        self.hook.wait_for(lambda got: "request.created" in self._types(request_id))

    def wait_ended(self, request_id: str, status: str) -> None:
        kind = {"approved": "decided", "denied": "decided"}.get(status, status)
        self.hook.wait_for(lambda got: f"request.{kind}" in self._types(request_id))

    def outage(self, on: bool) -> None:
        self.hook.statuses = [503] * 3 if on else []

    def refuse_for_good(self) -> None:
        self.hook.statuses = [410]

    def deliveries(self) -> int:
        return len(self.hook.deliveries)

    def serve_args(self) -> list[str]:
        return ["--webhook", self.hook.url]

    def hold(self, on: bool) -> None:
        if on:
            self.hook.hold = threading.Event()
            self.hook.arrived.clear()
        elif self.hook.hold is not None:
            self.hook.hold.set()

    def wait_in_flight(self) -> None:
        assert self.hook.arrived.wait(20)


class SlackDriver(Driver):
    name = "slack"

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        with FakeSlack() as slack:
            self.slack = slack
            yield self

    def options(self) -> dict[str, Any]:
        settings = SlackSettings(
            bot_token=TOKEN,
            signing_secret=SIGNING_SECRET,
            channel=CHANNEL,
            api_url=self.slack.api_url,
        )
        return {"slack": settings, "webhook_backoff": 0.05}

    def identity(self, person: str) -> str | None:
        return f"U0{person.upper()}"

    def _message(self, request_id: str) -> dict[str, Any] | None:
        for message in list(self.slack.messages.values()):
            if request_id in str(message.get("blocks")):
                return message
        return None

    def _buttons(self, message: dict[str, Any]) -> list[str]:
        return [
            str(element.get("action_id"))
            for block in message.get("blocks") or []
            if block.get("type") == "actions"
            for element in block.get("elements", [])
        ]

    def wait_reached(self, request_id: str) -> None:
        assert self.slack.wait_for(lambda s: self._message(request_id) is not None)

    def wait_updated(self, request_id: str) -> None:
        assert self.slack.wait_for(
            lambda s: "1 of 2" in str((self._message(request_id) or {}).get("blocks"))
        ), self._message(request_id)

    def wait_ended(self, request_id: str, status: str) -> None:
        def done(_: FakeSlack) -> bool:
            message = self._message(request_id)
            return message is not None and not self._buttons(message)

        assert self.slack.wait_for(done), self._message(request_id)

    def _click(self, user: str, request_id: str, status: str, *, forged: bool = False) -> Act:
        action = "ag_approve" if status == "approved" else "ag_deny_open"
        body = form(block_action(user, action, request_id))
        import time

        stamp = int(time.time())
        signature = sign(body, stamp, "x" * 32 if forged else SIGNING_SECRET)

        def send(sig: str) -> Act:
            before = len(self.slack.ephemeral_texts())
            answer = post(self.url, body=body, timestamp=stamp, signature=sig)
            text = answer.text
            if answer.status_code == 200:
                self.slack.wait_for(lambda s: len(s.ephemeral_texts()) > before, timeout=3)
                text += " ".join(self.slack.ephemeral_texts()[before:])
            return Act(
                answer.status_code,
                text,
                replay=lambda: send(sig),
            )

        return send(signature)

    def act(self, request_id: str, person: str, status: str, *, forged: bool = False) -> Act:
        identity = self.identity(person)
        assert identity is not None
        return self._click(identity, request_id, status, forged=forged)

    def act_unknown(self, request_id: str) -> Act:
        return self._click("U0STRANGER", request_id, "approved")

    def outage(self, on: bool) -> None:
        self.slack.down = on

    def refuse_for_good(self) -> None:
        self.slack.script = [(200, {"ok": False, "error": "invalid_auth"}, {})]

    def deliveries(self) -> int:
        return len(self.slack.of("chat.postMessage")) + len(self.slack.of("chat.update"))

    def serve_args(self) -> list[str]:
        return [
            "--slack-bot-token",
            TOKEN,
            "--slack-signing-secret",
            SIGNING_SECRET,
            "--slack-channel",
            CHANNEL,
            "--slack-api-url",
            self.slack.api_url,
        ]

    def hold(self, on: bool) -> None:
        if on:
            self.slack.arrived.clear()
        self.slack.delay = 8.0 if on else 0.0

    def wait_in_flight(self) -> None:
        assert self.slack.arrived.wait(20)


class EmailDriver(Driver):
    name = "email"
    follows = False
    per_person = True

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        box = Mailbox().start()
        self.box = box
        try:
            yield self
        finally:
            box.close()

    def options(self) -> dict[str, Any]:
        settings = email_settings(
            self.box.url, "approvals@example.com", ["role:payments"], backoff=0.05, environ={}
        )
        return {"email": settings}

    def identity(self, person: str) -> str | None:
        return f"{person}@example.com"

    def _mail(self, request_id: str, person: str, timeout: float = 10) -> Any:
        address = self.identity(person)
        return self.box.wait_until(
            lambda mail: (
                mail.message["X-Approval-Guard-Request"] == request_id and address in mail.rcpt_tos
            ),
            timeout=timeout,
        )

    def wait_reached(self, request_id: str) -> None:
        self._mail(request_id, "bob")

    def wait_reached_person(self, request_id: str, person: str) -> None:
        self._mail(request_id, person)

    def wait_ended(self, request_id: str, status: str) -> None:
        # A mail cannot be changed: its links now decide nothing (the request is not pending).
        links = self._mail(request_id, "bob").links()
        answer = post_decision(self.url, request_id, token_of(links["approve"]))
        assert answer.status_code in (409, 410), answer.text

    def _token(self, request_id: str, person: str, status: str) -> str:
        # Every mail of the request settled first: one not sent to them will not come.
        wait_for(
            lambda: self.store.list_outbox(channels=["email"], request_id=request_id),
            lambda rows: all(row.state != "pending" for row in rows),
        )
        try:
            mail = self._mail(request_id, person, timeout=0.5)
        except AssertionError:
            # Not mailed to them (not allowed, asked it themselves): a link reaching them anyway.
            credential = next(c for c in self.store.list_reviewers() if c.name == person)
            request = self.store.get_request(request_id)
            assert request is not None
            link = Link(
                mail_id="mail_notsent",
                request_id=request_id,
                reviewer_id=credential.id,
                address=str(self.identity(person)),
                action="approve" if status == "approved" else "deny",
                expires_at=request.deadline_at,
            )
            return make_token(self.store.link_secret(), link)
        return token_of(mail.links()["approve" if status == "approved" else "deny"])

    def _post(self, request_id: str, token: str) -> Act:
        def send(value: str) -> Act:
            status, text = _response(post_decision(self.url, request_id, value))
            return Act(status, text, replay=lambda: send(value))

        return send(token)

    def act(self, request_id: str, person: str, status: str, *, forged: bool = False) -> Act:
        token = self._token(request_id, person, status)
        if forged:  # the payload changed by one character: its mac no longer matches
            head, payload, mac = token.split(".")
            token = ".".join((head, payload[:-1] + ("A" if payload[-1] != "A" else "B"), mac))
        return self._post(request_id, token)

    def act_unknown(self, request_id: str) -> Act:
        return self._post(request_id, "v1.bm9ib2R5.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")

    def outage(self, on: bool) -> None:
        if on:
            self.box.stop()
        else:
            self.box.start()

    def refuse_for_good(self) -> None:
        self.box.refuse = "550 5.1.1 no such mailbox"

    def deliveries(self) -> int:
        return len(self.box.received)

    def serve_args(self) -> list[str]:
        return [
            "--smtp-url",
            self.box.url,
            "--smtp-from",
            "approvals@example.com",
            "--email-to",
            "role:payments",
        ]

    def hold(self, on: bool) -> None:
        if on:
            self.box.arrived.clear()
        self.box.delay = 8.0 if on else 0.0

    def wait_in_flight(self) -> None:
        assert self.box.arrived.wait(20)


class NtfyDriver(Driver):
    """ntfy: a push per allowed reviewer's topic; a tapped button posts back (as the app does)."""

    name = "ntfy"
    follows = False
    per_person = True

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        # Open topics: ``serve`` in the crash test is started without a token in its environment.
        with FakeNtfy(token=None) as ntfy:
            self.ntfy = ntfy
            yield self

    def options(self) -> dict[str, Any]:
        port = free_port()
        settings = make_settings(self.ntfy.url, None, f"http://127.0.0.1:{port}")
        return {"port": port, "channels": [NtfyChannel(settings)], "webhook_backoff": 0.05}

    def identity(self, person: str) -> str | None:
        return f"{person}-Zq3xW8rT5yU2"

    def _push(self, request_id: str, person: str) -> Publish | None:
        for one in self.ntfy.accepted(self.identity(person)):
            if one.body.get("actions") and f"(request {request_id})" in one.body["message"]:
                return one
        return None

    def wait_reached(self, request_id: str) -> None:
        self.wait_reached_person(request_id, "bob")

    def wait_reached_person(self, request_id: str, person: str) -> None:
        assert self.ntfy.wait_for(lambda _: self._push(request_id, person) is not None), (
            self.ntfy.publishes
        )

    def wait_ended(self, request_id: str, status: str) -> None:
        # A notification cannot be changed: a notice follows, and its buttons decide nothing.
        title = {"approved": "Approved", "denied": "Denied", "expired": "Expired"}[status]
        assert self.ntfy.wait_for(
            lambda fake: any(
                one.body.get("title", "").startswith(f"{title}: ")
                and f"(request {request_id})" in one.body.get("message", "")
                for one in fake.accepted(self.identity("bob"))
            )
        ), self.ntfy.publishes
        push = self._push(request_id, "bob")
        assert push is not None
        assert self.ntfy.tap(push, "Approve").status in (409, 410)

    def _url(self, request_id: str, person: str, status: str) -> str:
        label = "Approve" if status == "approved" else "Deny"
        push = self._push(request_id, person)
        if push is not None:
            return str(push.action(label)["url"])
        # Not pushed to them (not allowed, asked it themselves): a button reaching them anyway.
        credential = next(c for c in self.store.list_reviewers() if c.name == person)
        request = self.store.get_request(request_id)
        assert request is not None
        token = ntfy_tokens.sign(
            self.store.link_secret(),
            item_id="ntfy_notsent",
            request_id=request_id,
            reviewer_id=credential.id,
            topic=str(self.identity(person)),
            action=label.lower(),
            expires_at=request.deadline_at,
        )
        return ntfy_tokens.action_url(self.url, request_id, token)

    def _tap(self, url: str) -> Act:
        def send() -> Act:
            # What the app sends for an http action: POST, no body, its own user agent.
            answer = requests.post(url, data=b"", headers={"User-Agent": PHONE_AGENT}, timeout=10)
            return Act(answer.status_code, answer.text, replay=send)

        return send()

    def act(self, request_id: str, person: str, status: str, *, forged: bool = False) -> Act:
        url = self._url(request_id, person, status)
        if forged:  # the payload changed by one character: its mac no longer matches
            head, token = url.split("?token=")
            version, payload, mac = token.split(".")
            changed = payload[:-1] + ("A" if payload[-1] != "A" else "B")
            url = f"{head}?token={version}.{changed}.{mac}"
        return self._tap(url)

    def act_unknown(self, request_id: str) -> Act:
        token = "v1.bm9ib2R5.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        return self._tap(ntfy_tokens.action_url(self.url, request_id, token))

    def outage(self, on: bool) -> None:
        self.ntfy.down = on

    def refuse_for_good(self) -> None:
        self.ntfy.token = "tk_nowneededneededneeded0001"  # every publish: 401 unauthorized

    def deliveries(self) -> int:
        return len(self.ntfy.publishes)

    def serve_args(self) -> list[str]:
        return ["--ntfy-url", self.ntfy.url]

    def hold(self, on: bool) -> None:
        if on:
            self.ntfy.arrived.clear()
            self.ntfy.hold.clear()
        else:
            self.ntfy.hold.set()

    def wait_in_flight(self) -> None:
        assert self.ntfy.arrived.wait(20)


class DiscordDriver(Driver):
    name = "discord"

    @contextlib.contextmanager
    def running(self) -> Iterator[Driver]:
        with FakeDiscord() as discord:
            self.discord = discord
            yield self

    def options(self) -> dict[str, Any]:
        settings = DiscordSettings(
            bot_token=DISCORD_TOKEN,
            public_key=self.discord.public_key,
            channel=DISCORD_CHANNEL,
            api_url=self.discord.api_url,
        )
        return {"channels": [DiscordChannel(settings)], "webhook_backoff": 0.05}

    def identity(self, person: str) -> str | None:
        return str(80351110224678900 + PEOPLE.index(person))

    def _message(self, request_id: str) -> dict[str, Any] | None:
        for message in list(self.discord.messages.values()):
            if request_id in str(message.get("content")):
                return dict(message)
        return None

    def wait_reached(self, request_id: str) -> None:
        assert self.discord.wait_for(lambda d: self._message(request_id) is not None)

    def wait_updated(self, request_id: str) -> None:
        assert self.discord.wait_for(
            lambda d: "1 of 2" in str((self._message(request_id) or {}).get("content"))
        ), self._message(request_id)

    def wait_ended(self, request_id: str, status: str) -> None:
        def done(_: FakeDiscord) -> bool:
            message = self._message(request_id)
            return message is not None and message["components"] == []

        assert self.discord.wait_for(done), self._message(request_id)

    def _send(self, interaction: dict[str, Any], *, forged: bool) -> Act:
        raw = json.dumps(interaction).encode()
        stamp = str(int(time.time()))
        signer = FakeDiscord() if forged else self.discord  # another application's key
        signature = signer.sign(raw, stamp)
        endpoint = f"{self.url}/discord/interactions"

        def send() -> Act:
            answer = self.discord.post(
                endpoint, interaction, body=raw, timestamp=int(stamp), signature=signature
            )
            return Act(answer.status_code, answer.text, replay=send)

        return send()

    def _click(self, user: str, request_id: str, status: str, *, forged: bool = False) -> Act:
        self.wait_reached(request_id)
        message = self._message(request_id)
        assert message is not None
        # The button's custom_id, as the message had it (a late click: its buttons are gone).
        if status == "approved":
            approve = custom_id(APPROVE, request_id)
            return self._send(discord_clicks.click(user, message, approve), forged=forged)
        deny = custom_id(DENY, request_id)
        opened = self._send(discord_clicks.click(user, message, deny), forged=forged)
        if opened.status != 200 or json.loads(opened.text).get("type") != 9:
            return opened
        modal = json.loads(opened.text)
        submit = discord_clicks.submit(user, modal, {"reason": "not this one"}, message)
        return self._send(submit, forged=forged)

    def act(self, request_id: str, person: str, status: str, *, forged: bool = False) -> Act:
        identity = self.identity(person)
        assert identity is not None
        return self._click(identity, request_id, status, forged=forged)

    def act_unknown(self, request_id: str) -> Act:
        return self._click("99999999999999999", request_id, "approved")

    def outage(self, on: bool) -> None:
        self.discord.down = on

    def refuse_for_good(self) -> None:
        self.discord.script = [DISCORD_UNAUTHORIZED] * 20

    def deliveries(self) -> int:
        return self.discord.deliveries()

    def serve_args(self) -> list[str]:
        return [
            "--discord-bot-token",
            DISCORD_TOKEN,
            "--discord-public-key",
            self.discord.public_key,
            "--discord-channel",
            DISCORD_CHANNEL,
            "--discord-api-url",
            self.discord.api_url,
        ]

    def hold(self, on: bool) -> None:
        self.discord.hold(on)

    def wait_in_flight(self) -> None:
        assert self.discord.arrived.wait(20)


DRIVERS: dict[str, type[Driver]] = {
    "webhooks": WebhooksDriver,
    "slack": SlackDriver,
    "email": EmailDriver,
    "ntfy": NtfyDriver,
    "discord": DiscordDriver,
}
