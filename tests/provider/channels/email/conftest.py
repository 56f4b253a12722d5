"""Fixtures of the email tests: an SMTP server, and a mailing provider on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from approval_guard.provider import PostgresStore, Store, StoreProtocol
from tests.support.mail_team import Clock, MailTeam, start_mail_team
from tests.support.smtp import Mailbox

Opener = Callable[[], StoreProtocol]


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    """A real SMTP server on 127.0.0.1, stopped after the test."""
    box = Mailbox().start()
    try:
        yield box
    finally:
        box.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Opener, Clock]]:
    """``(open, clock)``: ``open()`` opens the test's store (a SQLite file, or a PG schema)."""
    clock = Clock()
    opened: list[StoreProtocol] = []
    dsn = request.getfixturevalue("pg_schema_dsn") if request.param == "postgres" else None

    def open_() -> StoreProtocol:
        store: StoreProtocol
        if dsn is not None:
            store = PostgresStore(dsn, clock=clock)
        else:
            store = Store(str(tmp_path / "approvals.sqlite3"), clock=clock)
        opened.append(store)
        return store

    try:
        yield open_, clock
    finally:
        for store in opened:
            store.close()


@pytest.fixture
def team(make_store: tuple[Opener, Clock], mailbox: Mailbox) -> Iterator[MailTeam]:
    """A provider mailing ``role:payments`` (alice, bob), with carol (ops) also addressed."""
    open_, clock = make_store
    started = start_mail_team(open_(), mailbox, clock)
    try:
        yield started
    finally:
        started.server.close()
