"""``--public-url`` with a path: the review page, its files, its sign-in and its API calls work
behind a reverse proxy serving the provider under that path; a query or fragment is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests

from approval_guard.cli import main
from approval_guard.provider import ProviderServer
from approval_guard.provider.channels.email.settings import email_settings
from approval_guard.provider.channels.public_url import check_public_url, public_link
from approval_guard.provider.channels.webhooks.payloads import request_link
from tests.support.api import Api
from tests.support.paths import REPO
from tests.support.prefix_proxy import prefix_proxy


def _urls(html: str) -> list[str]:
    """Every URL the page makes the browser fetch or post to (files, icon, forms)."""
    return re.findall(r"<(?:link|script|img|form)\b[^>]*\b(?:href|src|action)=\"([^\"]*)\"", html)


def test_the_review_page_and_its_files_work_under_a_path_prefix(tmp_path: Path) -> None:
    """Signed in at /approvals/: every file, the sign-in form and the page's API calls resolve."""
    with (
        prefix_proxy("/approvals") as proxy,
        ProviderServer(str(tmp_path / "a.db"), public_url=proxy.base) as server,
    ):
        proxy.upstream = server.url
        tokens = server.first_start_tokens
        assert tokens is not None
        created = Api(server.url, tokens.instance).new(tool="issue_refund")
        browser = requests.Session()
        page_url = f"{proxy.base}/"
        login = browser.get(page_url, timeout=10)
        assert 200 == login.status_code
        [action] = [url for url in _urls(login.text) if "static/" not in url]
        signed = browser.post(
            urljoin(page_url, action),
            data={"token": tokens.reviewer, "request": created["id"]},
            headers={"Origin": proxy.base.rsplit("/", 1)[0], "Sec-Fetch-Site": "same-origin"},
            allow_redirects=False,
            timeout=10,
        )
        assert 303 == signed.status_code, signed.text
        landing = urljoin(urljoin(page_url, action), signed.headers["Location"])
        assert f"{page_url}?request={created['id']}" == landing
        page = browser.get(landing, timeout=10)
        assert 'name="csrf-token"' in page.text
        files = [urljoin(landing, url) for url in _urls(page.text)]
        assert {f"{page_url}static/{name}" for name in ("icon.svg", "review.css")} <= set(files)
        assert f"{page_url}static/review.js" in files
        for url in files:
            assert 200 == browser.get(url, timeout=10).status_code, url
        # review.js fetches "." + each API path, relative to the page, as here.
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert csrf is not None
        listed = browser.get(
            urljoin(landing, "./v1/requests?status=pending"),
            headers={"X-CSRF-Token": csrf.group(1)},
            timeout=10,
        )
        assert 200 == listed.status_code, listed.text
        assert [created["id"]] == [r["id"] for r in listed.json()["requests"]]
    assert [] == [seen for seen in proxy.seen if seen[2] == 404]


def test_the_page_fetches_its_api_relative_to_itself() -> None:
    """review.js fetches "." + each path: never the host's root, which the proxy does not serve."""
    script = (REPO / "approval_guard/provider/static/review.js").read_text(encoding="utf-8")
    assert 'await fetch("." + path, init)' in script
    assert [] == re.findall(r"fetch\((?!\"\.\" \+ path)", script)


@pytest.mark.parametrize(
    ("base", "path", "joined"),
    [
        ("https://host/approvals", "/?request=r1", "https://host/approvals/?request=r1"),
        (
            "https://host/approvals/",
            "/email/requests/r1?token=t",
            "https://host/approvals/email/requests/r1?token=t",
        ),
        ("https://host", "/?request=r1", "https://host/?request=r1"),
        ("https://host/", "/static/email.css", "https://host/static/email.css"),
    ],
)
def test_a_link_keeps_the_public_urls_path(base: str, path: str, joined: str) -> None:
    """Joined onto the base: its path kept, no "//"."""
    assert joined == public_link(base, path)


def test_the_review_links_keep_the_public_urls_path() -> None:
    """A webhook's and Slack's "open" link is the page under the prefix, at the request."""
    assert "https://host/approvals/?request=a%2Fb" == request_link("https://host/approvals/", "a/b")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://host/approvals?x=1", "must not have a query"),
        ("https://host/approvals?", "must not have a query"),
        ("https://host/approvals#top", "must not have a fragment"),
        ("https://user:pw@host/approvals", "must not carry a user name or password"),
        ("host/approvals", "http(s)"),
    ],
)
def test_a_public_url_that_cannot_be_a_base_is_refused_at_start(
    url: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ProviderServer, email settings and ``serve --public-url``: a clear error, nothing served."""
    with pytest.raises(ValueError, match=re.escape(says)):
        check_public_url(url)
    with pytest.raises(ValueError, match=re.escape(says)):
        ProviderServer(str(tmp_path / "a.db"), public_url=url)
    with pytest.raises(ValueError, match=re.escape(says)):
        email_settings("smtp://127.0.0.1:25", "a@example.com", public_url=url, environ={})
    code = main(["serve", "--db", str(tmp_path / "b.db"), "--port", "0", "--public-url", url])
    err = capsys.readouterr().err
    assert 2 == code and says in err and "user:pw" not in err
