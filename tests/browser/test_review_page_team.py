"""Team review in a real headless browser: named reviewers, roles, two approvals, the audit trail.

A real provider (ProviderServer on a SQLite file, with a rules file) on
127.0.0.1; alice and bob have the role ``payments``, carol only ``support``;
each signs in with their own token in their own browser context. Without
playwright or chromium these tests skip (and fail when ``CI`` is set), as in
``tests/browser/test_review_page.py``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import requests

import approval_guard as ag
from approval_guard.cli import main as cli_main
from approval_guard.provider import ProviderServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

TIMEOUT_MS = 5_000
RULES = """\
[tools.issue_refund]
approvers = ["payments"]
approvals_required = 2
self_approval = false
"""
REFUND = {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}

# What the page's own JavaScript sends, forced from the signed-in page: the
# session cookie plus the CSRF token from the page's <meta>.
FORCED_POST = """async ([path, body]) => {
    const csrf = document.querySelector('meta[name="csrf-token"]').content;
    const response = await fetch(path, {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
        body: JSON.stringify(body),
    });
    return [response.status, await response.json()];
}"""


@attrs.define
class Team:
    """One provider with the rules file, its tokens, and a browser context per reviewer."""

    server: ProviderServer
    instance: str
    tokens: dict[str, str]
    browser: Browser
    contexts: list[BrowserContext] = attrs.field(factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def sign_in(self, name: str, *, request_id: str | None = None) -> Page:
        """A fresh browser context signed in as ``name``; wait until the list has loaded."""
        context = self.browser.new_context(viewport={"width": 1100, "height": 760})
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        link = f"{self.url}/?token={self.tokens[name]}"
        if request_id is not None:
            link += f"&request={request_id}"
        page.goto(link)
        page.get_by_test_id("sign-in").click()  # the link alone signs nobody in
        page.wait_for_selector('[data-testid="live"][data-state="live"]')
        return page

    def create(self, arguments: dict[str, Any] | None = None, **extra: Any) -> str:
        """Create an ``issue_refund`` request over HTTP, as an adapter would; return its id."""
        body = {"tool": "issue_refund", "arguments": arguments or REFUND, "timeout": "30m"}
        response = requests.post(
            f"{self.url}/v1/requests",
            json={**body, **extra},
            headers={
                "Authorization": f"Bearer {self.instance}",
                "Idempotency-Key": str(uuid.uuid4()),
            },
            timeout=5,
        )
        assert 201 == response.status_code, response.text
        request_id: str = response.json()["id"]
        return request_id

    def decide(self, name: str, request_id: str, body: dict[str, Any]) -> requests.Response:
        """A decision over the API with ``name``'s token (not through the page)."""
        return requests.post(
            f"{self.url}/v1/requests/{request_id}/decision",
            json=body,
            headers={"Authorization": f"Bearer {self.tokens[name]}"},
            timeout=5,
        )

    def status(self, request_id: str) -> str:
        response = requests.get(
            f"{self.url}/v1/requests/{request_id}",
            headers={"Authorization": f"Bearer {self.instance}"},
            timeout=5,
        )
        response.raise_for_status()
        status: str = response.json()["status"]
        return status


@pytest.fixture
def team(browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Team]:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    db = tmp_path / "team.sqlite3"
    server = ProviderServer(str(db), rules=rules)
    server.start()
    first = server.first_start_tokens
    assert first is not None
    made = Team(server=server, instance=first.instance, tokens={}, browser=browser)
    for name in ("alice", "bob"):
        made.tokens[name] = server.store.add_reviewer(name, roles=["payments"])
    # carol comes in through the CLI, as an operator would add her.
    capsys.readouterr()
    assert 0 == cli_main(["reviewers", "add", "carol", "--role", "support", "--db", str(db)])
    made.tokens["carol"] = capsys.readouterr().out.split()[-1]
    try:
        yield made
    finally:
        for context in made.contexts:
            context.close()
        server.close()


def card(page: Page, request_id: str) -> Any:
    return page.locator(f'[data-testid="request-{request_id}"]')


def done_card(page: Page, request_id: str) -> Any:
    return page.get_by_test_id("done-list").locator(f'[data-testid="request-{request_id}"]')


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Start ``call`` in a thread (the waiting agent); its result lands in the list."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(call()), daemon=True)
    thread.start()
    return thread, results


def refund_tool(team: Team, ran: list[dict[str, Any]]) -> Callable[..., Any]:
    guard = ag.Guard(
        base_url=team.url, credential=team.instance, poll_wait="5s", ledger=ag.MemoryLedger()
    )

    @guard.requires_approval(timeout="30m")
    def issue_refund(payment_id: str, amount: int, currency: str = "GBP") -> dict[str, Any]:
        ran.append({"payment_id": payment_id, "amount": amount})
        return {"payment_id": payment_id, "status": "refunded"}

    return issue_refund


def wait_for_pending(team: Team) -> str:
    """The id of the one pending request, once the waiting call has made it."""
    store = team.server.store
    for _ in range(100):
        pending = store.list_requests(status="pending", limit=10)
        if pending:
            [request] = pending
            return request.id
        threading.Event().wait(0.05)
    raise AssertionError("the guarded call made no request")


# ----------------------------------------------------------------------------- tests


def test_a_reviewer_without_the_role_sees_a_read_only_card(team: Team) -> None:
    """carol (support) sees why she cannot decide, no working buttons; a forced POST is 403."""
    request_id = team.create()

    page = team.sign_in("carol")
    shown = card(page, request_id)
    shown.wait_for()

    reason = shown.get_by_test_id("read-only")
    assert reason.is_visible()
    assert (
        "You cannot decide this request: deciding issue_refund needs the role payments;"
        " carol has support"
    ) == reason.text_content()
    assert "0 of 2 approvals" == shown.get_by_test_id("approvals").text_content()
    assert not shown.get_by_test_id("approve").is_visible()
    assert not shown.get_by_test_id("deny").is_visible()
    for path in (f"/review/requests/{request_id}/decision", f"/v1/requests/{request_id}/decision"):
        status, body = page.evaluate(
            FORCED_POST, [path, {"status": "approved", "note": None, "valid_for": "5m"}]
        )
        assert (403, "forbidden") == (status, body["error"]["type"]), path
    status, body = page.evaluate(
        FORCED_POST, [f"/review/requests/{request_id}/decision", {"status": "denied", "note": "x"}]
    )
    assert (403, "forbidden") == (status, body["error"]["type"])
    assert "pending" == team.status(request_id)


def test_two_approvals_in_the_browser_and_only_then_the_call_runs(team: Team) -> None:
    """alice approves (1 of 2, still pending, she cannot again); bob approves; then it runs."""
    from playwright.sync_api import expect

    ran: list[dict[str, Any]] = []
    issue_refund = refund_tool(team, ran)
    thread, results = in_thread(lambda: issue_refund("payment_123", 4900))
    request_id = wait_for_pending(team)

    alice = team.sign_in("alice")
    mine = card(alice, request_id)
    assert "0 of 2 approvals" == mine.get_by_test_id("approvals").text_content()
    assert mine.get_by_test_id("read-only").is_hidden()
    mine.get_by_test_id("approve").click()

    expect(mine.get_by_test_id("approvals")).to_have_text("1 of 2 approvals: alice")
    assert "pending" == mine.get_attribute("data-status")
    assert (
        alice.get_by_test_id("pending-list")
        .locator(f'[data-testid="request-{request_id}"]')
        .is_visible()
    )
    expect(mine.get_by_test_id("read-only")).to_have_text(
        "You cannot decide this request: you have already approved this request"
    )
    assert not mine.get_by_test_id("approve").is_visible()
    status, body = alice.evaluate(
        FORCED_POST,
        [f"/review/requests/{request_id}/decision", {"status": "approved", "valid_for": "5m"}],
    )
    assert (409, "already_approved") == (status, body["error"]["type"])
    assert "pending" == team.status(request_id)
    alice.wait_for_timeout(300)  # the guard's poll has seen one approval by now
    assert ([], []) == (ran, results)
    assert thread.is_alive()

    bob = team.sign_in("bob")
    theirs = card(bob, request_id)
    assert "1 of 2 approvals: alice" == theirs.get_by_test_id("approvals").text_content()
    assert theirs.get_by_test_id("read-only").is_hidden()
    theirs.get_by_test_id("approve").click()

    thread.join(timeout=15)
    assert [{"payment_id": "payment_123", "amount": 4900}] == ran
    assert [{"payment_id": "payment_123", "status": "refunded"}] == results
    for page in (bob, alice):  # alice's page follows by itself
        closed = done_card(page, request_id)
        closed.wait_for()
        assert "approved" == closed.get_attribute("data-status")
        assert (closed.get_by_test_id("outcome").text_content() or "").startswith(
            "Approved by alice, bob at "
        )


def test_the_requester_sees_their_own_request_read_only(team: Team) -> None:
    """self_approval = false: alice asked for it, so her card says why; bob's has the buttons."""
    request_id = team.create(requested_by="alice")

    alice = team.sign_in("alice")
    mine = card(alice, request_id)
    mine.wait_for()
    assert (
        "You cannot decide this request: alice asked for this request and may not approve"
        " it themselves"
    ) == mine.get_by_test_id("read-only").text_content()
    assert not mine.get_by_test_id("approve").is_visible()

    bob = team.sign_in("bob")
    theirs = card(bob, request_id)
    theirs.wait_for()
    assert theirs.get_by_test_id("read-only").is_hidden()
    assert theirs.get_by_test_id("approve").is_enabled()


def test_the_audit_trail_of_a_denial_names_the_denier(team: Team) -> None:
    """alice approved over the API, bob denies on the page: the closed card's trail names both."""
    from playwright.sync_api import expect

    request_id = team.create()
    assert 200 == team.decide("alice", request_id, {"status": "approved"}).status_code

    bob = team.sign_in("bob")
    pending = card(bob, request_id)
    pending.get_by_test_id("note").fill("Refund already issued by phone.")
    pending.get_by_test_id("deny").click()

    closed = done_card(bob, request_id)
    closed.wait_for()
    assert "denied" == closed.get_attribute("data-status")
    assert (closed.get_by_test_id("outcome").text_content() or "").startswith("Denied by bob at ")
    closed.get_by_text("Audit trail").click()
    rows = closed.get_by_test_id("audit").locator("li")
    expect(rows).to_have_count(3)
    texts = [rows.nth(n).text_content() or "" for n in range(3)]
    assert texts[0].endswith("request.created")
    assert texts[1].endswith("alice (127.0.0.1) · request.approval · 1 of 2")
    assert texts[2].endswith("bob (127.0.0.1) · request.denial")


def test_an_open_audit_trail_follows_the_approvals(team: Team) -> None:
    """The trail opened on a pending card shows a new approval without being reopened."""
    from playwright.sync_api import expect

    request_id = team.create()
    alice = team.sign_in("alice")
    mine = card(alice, request_id)
    mine.get_by_text("Audit trail").click()
    rows = mine.get_by_test_id("audit").locator("li")
    expect(rows).to_have_count(1)

    assert 200 == team.decide("bob", request_id, {"status": "approved"}).status_code

    expect(mine.get_by_test_id("approvals")).to_have_text("1 of 2 approvals: bob")
    expect(rows).to_have_count(2)
    assert (rows.nth(1).text_content() or "").endswith(
        "bob (127.0.0.1) · request.approval · 1 of 2"
    )


def test_names_in_the_audit_trail_show_hidden_characters_escaped(team: Team) -> None:
    """A reviewer name with a bidi override shows as \\u202e in the trail, never raw."""
    from playwright.sync_api import expect

    store = team.server.store
    token = store.create_credential("reviewer", "ali\u202ece", roles=["payments"])
    team.tokens["ali\u202ece"] = token
    request_id = team.create()
    assert 200 == team.decide("ali\u202ece", request_id, {"status": "approved"}).status_code

    page = team.sign_in("bob")
    shown = card(page, request_id)
    expect(shown.get_by_test_id("approvals")).to_have_text("1 of 2 approvals: ali\\u202ece")
    shown.get_by_text("Audit trail").click()
    rows = shown.get_by_test_id("audit").locator("li")
    expect(rows).to_have_count(2)
    assert "ali\\u202ece (127.0.0.1) · request.approval" in (rows.nth(1).text_content() or "")
    assert "\u202e" not in (page.locator("body").text_content() or "")


def test_a_link_to_one_request_opens_and_highlights_it(team: Team) -> None:
    """Signing in from /?token=…&request=<id> keeps the id, scrolls to it and outlines it."""
    ids = [team.create({"payment_id": f"p{i}", "amount": i}) for i in range(8)]
    wanted = ids[0]  # the oldest: last in the list, below the fold

    page = team.sign_in("alice", request_id=wanted)

    assert page.url.endswith(f"/?request={wanted}")
    assert "token=" not in page.url
    target = card(page, wanted)
    target.wait_for()
    page.wait_for_selector(f'[data-testid="request-{wanted}"][data-highlight="true"]')
    assert [wanted] == page.eval_on_selector_all(
        '[data-highlight="true"]', "cards => cards.map((c) => c.dataset.requestId)"
    )
    assert "3px" == target.evaluate("node => getComputedStyle(node).outlineWidth")
    assert target.evaluate(
        "node => { const r = node.getBoundingClientRect();"
        " return r.top < window.innerHeight && r.bottom > 0; }"
    )
    assert page.evaluate("window.scrollY") > 0
    assert target.locator("details.audit-trail").evaluate("d => d.open")


def test_a_link_to_a_closed_request_highlights_it_in_the_closed_list(team: Team) -> None:
    """?request=<id> of a denied request outlines its closed card and opens its arguments."""
    request_id = team.create()
    assert 200 == team.decide("bob", request_id, {"status": "denied", "note": "no"}).status_code
    team.create()

    page = team.sign_in("alice", request_id=request_id)

    closed = done_card(page, request_id)
    closed.wait_for()
    page.wait_for_selector(f'[data-testid="request-{request_id}"][data-highlight="true"]')
    assert closed.get_by_test_id("arguments").is_visible()


def test_no_edit_inputs_where_no_edit_can_be_sent(team: Team) -> None:
    """Editable, but carol may not decide and two must approve: nobody gets an input."""
    from playwright.sync_api import expect

    request_id = team.create(editable=["amount"])

    carol = team.sign_in("carol")
    theirs = card(carol, request_id)
    theirs.wait_for()
    assert theirs.get_by_test_id("read-only").is_visible()
    assert theirs.get_by_test_id("edits").is_hidden()
    assert '"amount": 4900' in (theirs.get_by_test_id("arguments").text_content() or "")

    alice = team.sign_in("alice")
    mine = card(alice, request_id)
    mine.wait_for()
    assert mine.get_by_test_id("edits").is_hidden()
    mine.get_by_test_id("approve").click()

    expect(mine.get_by_test_id("approvals")).to_have_text("1 of 2 approvals: alice")
    assert mine.get_by_test_id("card-error").is_hidden()


def test_a_tool_without_a_rule_keeps_its_edit_inputs(team: Team) -> None:
    """A tool the rules file does not name: any reviewer, carol too, decides alone and may edit."""
    request_id = team.create(
        {"customer": "c_1", "name": "Old"}, tool="rename_customer", editable=["name"]
    )

    carol = team.sign_in("carol")
    theirs = card(carol, request_id)
    theirs.wait_for()
    assert theirs.get_by_test_id("read-only").is_hidden()
    assert theirs.get_by_test_id("approvals").is_hidden()
    edit = theirs.get_by_test_id("edit")
    assert '"Old"' == edit.input_value()
    edit.fill('"New"')
    theirs.get_by_test_id("approve").click()

    closed = done_card(carol, request_id)
    closed.wait_for()
    assert "approved" == closed.get_attribute("data-status")
    assert (closed.get_by_test_id("outcome").text_content() or "").startswith(
        "Approved with changes by carol at "
    )
    assert '"New"' == closed.get_by_test_id("change-after").text_content()
