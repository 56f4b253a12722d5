"""The one outbox worker against hostile receivers: deadlines, isolation, one send at a time."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from starlette.concurrency import run_in_threadpool

from approval_guard.provider import ProviderServer, Store, StoreProtocol
from approval_guard.provider.channels.base import Channel, Item, Moment, NewItem, SendResult, Sent
from approval_guard.provider.channels.outbox import OutboxWorker, lease_for
from approval_guard.provider.channels.webhooks.channel import WebhooksChannel
from approval_guard.provider.channels.webhooks.settings import webhook_settings
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from tests.support.api import Api, wait_for
from tests.support.drip import DripReceiver
from tests.support.webhook_receiver import Receiver

DEADLINE = 1.5


def _channel(*urls: str, backoff: float = 0.05) -> WebhooksChannel:
    settings = webhook_settings(
        [WebhookTarget(url) for url in urls], None, backoff, 24 * 3600.0, None
    )
    channel = WebhooksChannel(settings)
    channel.deadline = DEADLINE
    return channel


@pytest.mark.slow  # a hostile receiver held open to its deadline: a fault suite
def test_a_dripping_receiver_is_cut_at_the_deadline_and_starves_no_one(tmp_path: Path) -> None:
    """One byte every 0.5 s: each post ends at its deadline; a healthy target gets all 40 events."""
    with DripReceiver(every=0.5) as drip, Receiver() as healthy:
        channel = _channel(drip.url, healthy.url)
        with ProviderServer(str(tmp_path / "a.db"), channels=[channel]) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            api = Api(server.url, tokens.instance)
            started = time.monotonic()
            for _ in range(40):
                api.new()
            healthy.wait_count(40, timeout=30)
            took = time.monotonic() - started
            # Meanwhile the drip target held at most its share of the 16 slots.
            assert drip.most_open <= WebhooksChannel.per_target
            wait_for(lambda: len(drip.connections) >= 8, timeout=30)
    assert 40 == len({one.id for one in healthy.deliveries})
    # Far less than 40 posts x a 1.5 s deadline, shared by 4 slots of the drip target.
    assert took < 25, took
    closed = [one for one in drip.connections if one.closed is not None]
    assert closed
    # Cut at the deadline (plus the moment it takes to notice), never left open forever.
    assert max(one.closed - one.opened for one in closed) < DEADLINE + 2.0  # type: ignore[operator]


@pytest.mark.slow  # a hostile receiver held open to its deadline: a fault suite
def test_an_item_is_never_posted_twice_at_once(tmp_path: Path) -> None:
    """A send always ends before its lease does: no webhook-id is ever open twice at once."""
    assert lease_for([_channel("http://127.0.0.1:9/x")]) > DEADLINE
    with DripReceiver(every=0.3) as drip:
        channel = _channel(drip.url)
        with ProviderServer(str(tmp_path / "a.db"), channels=[channel]) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new()
            # The same item is tried again and again (each try cut at the deadline).
            wait_for(lambda: len(drip.connections) >= 3, timeout=30)
        spans = [(one.webhook_id, one.opened, one.closed) for one in drip.connections]
    assert 1 == len({webhook_id for webhook_id, _, _ in spans})
    ordered = sorted(spans, key=lambda one: one[1])
    for (_, _, closed), (_, opened, _) in itertools.pairwise(ordered):
        assert closed is not None and closed <= opened, ordered


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    """A 429 with Retry-After: 2 is not tried again before two seconds have passed."""
    with Receiver(statuses=[429]) as hook:
        hook.answer_headers["Retry-After"] = "2"
        with ProviderServer(
            str(tmp_path / "a.db"), channels=[_channel(hook.url)], webhook_backoff=0.05
        ) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new()
            got = hook.wait_count(2, timeout=20)
            (row,) = wait_for(
                lambda: server.store.list_outbox(),
                lambda rows: rows and rows[0].state == "delivered",
            )
    assert [429, 200] == [one.status for one in got[:2]]
    first = row.history[0]
    assert first.next_attempt_at is not None
    wait = (first.next_attempt_at - first.at).total_seconds()
    assert 2.0 <= wait < 2.5, wait  # its Retry-After, not the 0.05 s backoff


def test_a_retry_after_of_zero_still_waits_for_the_backoff(tmp_path: Path) -> None:
    """503 with Retry-After: 0 again and again: each retry waits the backoff, no hot loop."""
    with Receiver(statuses=[503] * 1000) as hook:
        hook.answer_headers["Retry-After"] = "0"
        channel = _channel(hook.url, backoff=0.5)
        with ProviderServer(str(tmp_path / "a.db"), channels=[channel]) as server:
            tokens = server.first_start_tokens
            assert tokens is not None
            Api(server.url, tokens.instance).new()
            hook.wait_count(3, timeout=20)
            (row,) = wait_for(
                lambda: server.store.list_outbox(), lambda rows: len(rows[0].history) >= 2
            )
    for attempt in row.history[:2]:
        assert attempt.next_attempt_at is not None
        wait = (attempt.next_attempt_at - attempt.at).total_seconds()
        assert wait >= 0.5 * 0.8, wait  # the backoff's (with its jitter), not Retry-After's 0


class _ThreadSend(Channel):
    """A channel whose send blocks in a thread (as SMTP's does) past its deadline and lease."""

    name: ClassVar[str] = "blocking"
    deadline = 0.2

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()
        self.most_open = 0
        self.sends = 0
        self.release = threading.Event()
        self._lock = threading.Lock()

    def queue(self, moment: Moment) -> Sequence[NewItem]:
        if moment.kind != "created":
            return ()
        return [NewItem(target="somewhere", event_type="blocking.item", payload={})]

    def _block(self, item_id: str) -> None:
        with self._lock:
            self.open[item_id] += 1
            self.sends += 1
            self.most_open = max(self.most_open, self.open[item_id])
        try:
            self.release.wait(3.0)
        finally:
            with self._lock:
                self.open[item_id] -= 1

    async def send(self, item: Item, store: StoreProtocol) -> SendResult:
        await run_in_threadpool(self._block, item.id)
        return Sent()


@pytest.mark.slow  # a hostile receiver held open to its deadline: a fault suite
def test_an_item_whose_send_outlives_its_lease_is_not_sent_again_meanwhile(
    tmp_path: Path,
) -> None:
    """A send stuck in a thread past its lease: this worker does not start a second one."""
    store = Store(str(tmp_path / "a.db"))
    channel = _ThreadSend()
    store.set_channels([channel])
    owner = store.authenticate(store.create_credential("instance", "agent"))
    assert owner is not None
    store.create_request(
        owner=owner, idempotency_key="k", tool="t", arguments={}, timeout_seconds=600
    )

    async def run() -> None:
        worker = OutboxWorker(store, [channel])
        worker.lease = 0.5  # far shorter than the thread's stay: it runs out while it sends
        task = asyncio.create_task(worker.run())
        try:
            for _ in range(300):  # the stuck send and two leases' time after it
                await asyncio.sleep(0.01)
                if channel.sends >= 2:
                    break
            await asyncio.sleep(1.2)
        finally:
            channel.release.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    try:
        asyncio.run(run())
    finally:
        store.close()
    assert channel.most_open == 1
