"""The SMTP URL's forms, the password out of sight, and STARTTLS with a login on a real server."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from approval_guard.provider import Store
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.channels.email.smtp import ENV_SMTP_PASSWORD, parse_smtp_url
from tests.support.api import wait_for
from tests.support.mail_team import Clock, start_mail_team
from tests.support.smtp import Mailbox


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://mail.internal", ("mail.internal", 25, "plain", None)),
        ("smtp://127.0.0.1:2525", ("127.0.0.1", 2525, "plain", None)),
        ("smtp+starttls://bot@mail.example.com", ("mail.example.com", 587, "starttls", "bot")),
        (
            "smtp://bot@mail.example.com:587?starttls=true",
            ("mail.example.com", 587, "starttls", "bot"),
        ),
        ("smtps://bot%40corp@mail.example.com", ("mail.example.com", 465, "tls", "bot@corp")),
        ("SMTPS://[::1]:4650", ("::1", 4650, "tls", None)),
    ],
)
def test_the_url_forms(url: str, expected: tuple[str, int, str, str | None]) -> None:
    """Scheme, default port, STARTTLS by scheme or query, a percent-encoded user."""
    server = parse_smtp_url(url, environ={})
    assert expected == (server.host, server.port, server.security, server.username)


@pytest.mark.parametrize(
    "url",
    [
        "http://mail.example.com",
        "smtp://",
        "smtp://mail.example.com/path",
        "smtp://mail.example.com?tls=yes",
        "smtps://mail.example.com?starttls=true",
        "smtp://:s3cret-pw@mail.example.com",
        "smtp://bot:s3cret-pw@mail.example.com",
        "smtp://mail.example.com:99999",
        "smtp://bot:s3cret-pw@mail example.com",
        "smtp://bot:s3cret-pw@[::ffff:10.0.0.1]:25",
    ],
)
def test_a_bad_url_is_refused_without_quoting_it(url: str) -> None:
    """A wrong scheme, path, option or port, a password in the clear: ValueError, never quoted."""
    with pytest.raises(ValueError) as caught:
        parse_smtp_url(url, environ={})
    assert "s3cret-pw" not in str(caught.value)


def test_the_password_comes_from_the_url_or_the_environment_and_is_never_shown() -> None:
    """user:password@ or $APPROVAL_GUARD_SMTP_PASSWORD; the repr and display hold neither."""
    in_url = parse_smtp_url("smtps://bot:p%40ss-1@mail.example.com", environ={})
    from_env = parse_smtp_url(
        "smtp+starttls://bot@mail.example.com", environ={ENV_SMTP_PASSWORD: "env-pass-2"}
    )
    assert ("p@ss-1", "env-pass-2") == (in_url.password, from_env.password)
    settings = email_settings(
        "smtps://bot:p%40ss-1@mail.example.com", "approvals@example.com", environ={}
    )
    for shown in (repr(in_url), in_url.display, repr(from_env), repr(settings)):
        assert "p@ss-1" not in shown and "p%40ss-1" not in shown and "env-pass-2" not in shown


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]", "127.0.0.2"]
)
def test_a_password_on_plain_smtp_to_this_machine_is_allowed(host: str) -> None:
    """A local relay may take a login without TLS: nothing crosses the network."""
    assert "pw" == parse_smtp_url(f"smtp://bot:pw@{host}:2525", environ={}).password


def test_starttls_and_a_login_on_a_real_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that requires STARTTLS and a login gets the mail; the password is never logged."""
    caplog.set_level(logging.DEBUG, logger="approval_guard")
    box = Mailbox(tls_dir=tmp_path, login=("bot", "smtp-pass-3")).start()
    store = Store(str(tmp_path / "a.sqlite3"))
    clock = Clock()
    team = None
    try:
        team = start_mail_team(store, box, clock, to=("alice@example.com",))
        # The team's server was built without the password or the CA: build the real one.
        team.server.close()
        from approval_guard.provider import ProviderServer
        from approval_guard.provider.rules.config import parse_rules
        from tests.support.mail_team import RULES, SENDER

        settings = email_settings(
            box.url,
            SENDER,
            ["alice@example.com"],
            backoff=0.05,
            tls_context=box.client_tls,
            environ={ENV_SMTP_PASSWORD: "smtp-pass-3"},
        )
        assert box.url.startswith("smtp+starttls://bot@")
        team.server = ProviderServer(store, rules=parse_rules(RULES), email=settings).start()
        created = team.instance.new(tool="issue_refund")
        mail = team.mail_for(created["id"], "alice@example.com")
        assert {"approve", "deny"} == set(mail.links())
        assert all("smtp-pass-3" not in r.getMessage() for r in caplog.records)
    finally:
        if team is not None:
            team.server.close()
        store.close()
        box.close()


def test_a_wrong_password_is_given_up_at_once_and_never_recorded(tmp_path: Path) -> None:
    """A refused login (535) is permanent: given up at once, audited, kept without the password."""
    box = Mailbox(tls_dir=tmp_path, login=("bot", "right-pass")).start()
    store = Store(str(tmp_path / "a.sqlite3"))
    team = start_mail_team(store, box, Clock(), to=())
    try:
        team.server.close()
        from approval_guard.provider import ProviderServer
        from approval_guard.provider.rules.config import parse_rules
        from tests.support.mail_team import RULES, SENDER

        settings = email_settings(
            f"smtp+starttls://bot:wrong-pass-4@127.0.0.1:{box.port}",
            SENDER,
            ["alice@example.com"],
            backoff=0.05,
            tls_context=box.client_tls,
            environ={},
        )
        team.server = ProviderServer(store, rules=parse_rules(RULES), email=settings).start()
        created = team.instance.new(tool="issue_refund")
        wait_for(
            lambda: store.list_outbox(channels=["email"], request_id=created["id"]),
            lambda rows: rows and all(r.state != "pending" for r in rows),
            timeout=15,
        )
        (row,) = store.list_outbox(channels=["email"], request_id=created["id"])
        assert ("given_up", 1) == (row.state, row.attempts)
        assert "SMTPAuthenticationError" in (row.last_result or "")
        wait_for(
            lambda: [r.action for r in store.audit(request_id=created["id"])],
            lambda actions: "email.given_up" in actions,
            timeout=10,
        )
        assert "wrong-pass-4" not in repr(store.list_outbox()) + repr(store.audit())
        assert [] == box.received
    finally:
        team.server.close()
        store.close()
        box.close()
