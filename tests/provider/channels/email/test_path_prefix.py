"""Behind a reverse proxy serving the provider under a path (``--public-url https://host/approvals``),
an email's links, its confirmation page, the page's stylesheet and its form all keep the prefix.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urljoin

import requests

from approval_guard.provider import ProviderServer, Store
from approval_guard.provider.channels.email.settings import email_settings
from tests.support.api import Api
from tests.support.mail_team import SENDER, page_text
from tests.support.prefix_proxy import prefix_proxy
from tests.support.smtp import Mailbox


def _attribute(html: str, tag: str, name: str) -> str:
    found = re.search(rf"<{tag}\b[^>]*\b{name}=\"([^\"]*)\"", html)
    assert found is not None, f"no <{tag} {name}=...> in the page"
    return found.group(1).replace("&amp;", "&")


def test_an_email_link_under_a_path_prefix_confirms_and_decides(
    tmp_path: Path, mailbox: Mailbox
) -> None:
    """The link, the page's CSS and its form's action resolve under /approvals/: approved."""
    store = Store(str(tmp_path / "a.sqlite3"))
    store.add_reviewer("alice", roles=["payments"])
    store.link_identity("alice", "email", "alice@example.com")
    settings = email_settings(mailbox.url, SENDER, ["alice@example.com"], environ={})
    with prefix_proxy("/approvals") as proxy:
        server = ProviderServer(store, email=settings, public_url=f"{proxy.base}/")
        try:
            server.start()
            proxy.upstream = server.url
            tokens = server.first_start_tokens
            assert tokens is not None
            created = Api(server.url, tokens.instance).new(tool="issue_refund")
            mail = mailbox.wait_until(
                lambda m: m.message["X-Approval-Guard-Request"] == created["id"]
            )
            link = mail.links()["approve"]
            assert link.startswith(f"{proxy.base}/email/requests/{created['id']}?token=")
            # Followed as a mail client does, then as the browser follows the page.
            page = requests.get(link, timeout=10)
            assert 200 == page.status_code, page.text
            css = urljoin(link, _attribute(page.text, "link", "href"))
            assert f"{proxy.base}/static/email.css" == css
            assert 200 == requests.get(css, timeout=10).status_code
            action = urljoin(link, _attribute(page.text, "form", "action"))
            assert f"{proxy.base}/email/requests/{created['id']}/decision" == action
            token = _attribute(page.text, "input", "value")
            done = requests.post(action, data={"token": token, "note": ""}, timeout=10)
            assert 200 == done.status_code, done.text
            assert "Approved" in page_text(done)
            # The result page's stylesheet resolves under the prefix too (one level deeper).
            css = urljoin(action, _attribute(done.text, "link", "href"))
            assert f"{proxy.base}/static/email.css" == css
            assert "approved" == store.get_request(created["id"]).status  # type: ignore[union-attr]
            # Nothing the browser followed lost the prefix (the proxy 404s such a URL).
            assert [] == [seen for seen in proxy.seen if seen[2] == 404]
        finally:
            server.close()
            store.close()
