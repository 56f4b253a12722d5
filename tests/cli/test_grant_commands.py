"""``approve --grant-*``, ``grants list|show|revoke|approve`` and ``agents add|list|remove``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from approval_guard.cli import main
from approval_guard.provider import Store
from approval_guard.testing import LocalProvider
from tests.support.cli import create, read, run


def test_approve_with_a_grant_then_the_next_call_is_covered(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """--grant-for 1h --grant-uses 2 --grant-match amount=1..5000: printed, then used."""
    first = create(provider)
    code, out, err = run(
        capsys,
        provider,
        "approve",
        first,
        "--grant-for",
        "1h",
        "--grant-uses",
        "2",
        "--grant-match",
        "amount=1..5000",
    )
    assert (code, err) == (0, ""), err
    assert "gave a standing grant" in out and "2 uses left" in out
    assert "amount 1..5000" in out and "payment_id the same" in out
    second = create(provider, arguments={"payment_id": "payment_123", "amount": 10})
    assert read(provider, second)["status"] == "approved"
    assert read(provider, second)["decision"]["grant"]["uses_left"] == 1


@pytest.mark.parametrize(
    ("match", "covered", "outside"),
    [
        ('payment_id=in:["payment_123","p2"]', "p2", "p3"),
        ("payment_id=prefix:pay", "pay_9", "Pay_9"),
        ("payment_id=any", "anything", None),
        ('amount={"max": 4900}', None, None),
    ],
)
def test_grant_match_syntax(
    capsys: pytest.CaptureFixture[str],
    provider: LocalProvider,
    match: str,
    covered: str | None,
    outside: str | None,
) -> None:
    """Each documented --grant-match form reaches the provider as its constraint."""
    first = create(provider)
    code, _, err = run(
        capsys, provider, "approve", first, "--grant-for", "10m", "--grant-match", match
    )
    assert code == 0, err
    if covered is not None:
        made = create(provider, arguments={"payment_id": covered, "amount": 4900})
        assert read(provider, made)["status"] == "approved"
    if outside is not None:
        made = create(provider, arguments={"payment_id": outside, "amount": 4900})
        assert read(provider, made)["status"] == "pending"


@pytest.mark.parametrize(
    "argv",
    [
        ["--grant-uses", "2"],
        ["--grant-for", "1h", "--grant-match", "amount"],
        ["--grant-for", "1h", "--grant-match", "amount=1e"],
        ["--grant-for", "1h", "--grant-match", "amount=in:3"],
        ["--grant-for", "1h", "--grant-uses", "0"],
    ],
)
def test_a_bad_grant_option_is_a_usage_error_and_sends_nothing(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, argv: list[str]
) -> None:
    """Exit 2, one line, and the request is still pending."""
    first = create(provider)
    code, _, err = run(capsys, provider, "approve", first, *argv)
    assert code == 2 and err.count("\n") == 1, err
    assert read(provider, first)["status"] == "pending"


def test_grants_list_show_and_revoke(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """list shows it with its scope; show lists covered pending requests; revoke ends it."""
    waiting = create(provider, arguments={"payment_id": "payment_123", "amount": 1})
    first = create(provider)
    run(capsys, provider, "approve", first, "--grant-for", "1h", "--grant-match", "amount=any")
    code, out, _ = run(capsys, provider, "grants", "list", "--json")
    grants = json.loads(out)
    assert code == 0 and [one["status"] for one in grants] == ["live"]
    grant_id = grants[0]["id"]
    code, out, _ = run(capsys, provider, "grants", "show", grant_id)
    assert code == 0 and waiting in out and "amount any" in out
    code, out, _ = run(capsys, provider, "grants", "revoke", grant_id, "--note", "done")
    assert code == 0 and "revoked" in out
    code, out, _ = run(capsys, provider, "grants", "list")
    assert "no standing grants" in out
    code, out, _ = run(capsys, provider, "grants", "list", "--all")
    assert grant_id in out and "revoked" in out
    made = create(provider)
    assert read(provider, made)["status"] == "pending"


def test_grants_need_a_reviewer_token(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider
) -> None:
    """The instance credential is refused (403) with one clear line."""
    code = main(["grants", "list", "--url", provider.url, "--token", provider.credential])
    _, err = capsys.readouterr()
    assert code == 1 and "403" in err


def test_agents_add_list_remove(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The token is printed once; list shows names only; remove ends its token and grants."""
    db = str(tmp_path / "p.sqlite3")
    Store(db).close()
    assert main(["agents", "add", "billing-bot", "--db", db]) == 0
    out = capsys.readouterr().out
    token = out.strip().splitlines()[-1]
    assert token.startswith("agi_")
    assert main(["agents", "add", "billing-bot", "--db", db]) == 1
    assert "already named" in capsys.readouterr().err
    assert main(["agents", "list", "--json", "--db", db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [one["name"] for one in listed] == ["billing-bot"]
    assert token not in json.dumps(listed)
    store = Store(db)
    try:
        assert store.authenticate(token) is not None
    finally:
        store.close()
    assert main(["agents", "remove", "billing-bot", "--db", db]) == 0
    assert main(["agents", "remove", "billing-bot", "--db", db]) == 1
    store = Store(db)
    try:
        assert store.authenticate(token) is None
    finally:
        store.close()


def test_a_named_agents_grant_names_the_agent(
    capsys: pytest.CaptureFixture[str], provider: LocalProvider, tmp_path: Path
) -> None:
    """A grant's "agent" is the credential's name; its calls and only its are covered."""
    del tmp_path
    token = provider.server.store.add_agent("billing-bot")
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "k1"}
    body = {"tool": "issue_refund", "arguments": {"payment_id": "x", "amount": 1}, "timeout": "5m"}
    first = requests.post(f"{provider.url}/v1/requests", json=body, headers=headers, timeout=5)
    run(capsys, provider, "approve", first.json()["id"], "--grant-for", "5m")
    _, out, _ = run(capsys, provider, "grants", "list", "--json")
    assert json.loads(out)[0]["agent"] == "billing-bot"
    again = requests.post(
        f"{provider.url}/v1/requests",
        json=body,
        headers={**headers, "Idempotency-Key": "k2"},
        timeout=5,
    )
    assert again.json()["status"] == "approved"
