"""The review page's backend: login by token, session cookie, CSRF, static files, headers."""

# House style puts the expected value first (STYLE.md); ruff's SIM300 wants it last.

from __future__ import annotations

import logging

import pytest
import requests

from approval_guard.provider.http.limits import CONTENT_SECURITY_POLICY
from approval_guard.testing import LocalProvider
from tests.support.api import Api, error_type, sign_in, signed_in


def assert_html_security_headers(response: requests.Response) -> None:
    assert CONTENT_SECURITY_POLICY == response.headers["Content-Security-Policy"]
    assert "nosniff" == response.headers["X-Content-Type-Options"]
    assert "no-referrer" == response.headers["Referrer-Policy"]


def test_login_page_without_a_session(provider: LocalProvider) -> None:
    """GET / without a session shows the login form, with the strict CSP."""
    response = requests.get(f"{provider.url}/", timeout=5)
    assert 200 == response.status_code
    assert response.headers["Content-Type"].startswith("text/html")
    assert 'name="token"' in response.text
    assert_html_security_headers(response)


def test_token_login_sets_an_httponly_cookie_and_redirects(provider: LocalProvider) -> None:
    """POST / from the page's form answers 303 to ./ (the page) with an HttpOnly, Strict cookie."""
    response = sign_in(provider.url, provider.reviewer_credential)
    assert 303 == response.status_code
    assert "./" == response.headers["Location"]  # relative: kept under a proxy's path prefix
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("ag_session=")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/" in cookie
    assert provider.reviewer_credential not in cookie
    assert_html_security_headers(response)


def test_a_token_link_signs_nobody_in_until_its_button_is_pressed(provider: LocalProvider) -> None:
    """GET /?token= (from any site) sets no cookie: it shows a button that posts the token."""
    response = requests.get(
        f"{provider.url}/",
        params={"token": provider.reviewer_credential, "request": 'a"b'},
        headers={"Sec-Fetch-Site": "cross-site"},
        allow_redirects=False,
        timeout=5,
    )
    assert 200 == response.status_code
    assert "Set-Cookie" not in response.headers
    assert "no-store" == response.headers["Cache-Control"]
    assert '<form method="post" action="./"' in response.text
    assert f'name="token" type="hidden" value="{provider.reviewer_credential}"' in response.text
    assert 'name="request" type="hidden" value="a&quot;b"' in response.text
    assert 'data-testid="sign-in"' in response.text
    assert_html_security_headers(response)


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
    ],
    ids=["cross-site", "same-site-not-same-origin", "another-origin", "opaque-origin"],
)
def test_a_sign_in_posted_from_another_site_is_refused(
    provider: LocalProvider, headers: dict[str, str]
) -> None:
    """A cross-site form post of a valid token is 403 and starts no session."""
    response = sign_in(provider.url, provider.reviewer_credential, headers=headers)
    assert 403 == response.status_code
    assert "Set-Cookie" not in response.headers
    assert_html_security_headers(response)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("token=a&token=b", "application/x-www-form-urlencoded"),
        ("nothing=1", "application/x-www-form-urlencoded"),
        ('{"token": "x"}', "application/json"),
        ("token=a&other=b", "application/x-www-form-urlencoded"),
    ],
    ids=["twice", "no-token", "json", "another-field"],
)
def test_a_malformed_sign_in_is_400(provider: LocalProvider, body: str, content_type: str) -> None:
    """Anything but the form's token (and request) is 400, never a session."""
    response = requests.post(
        f"{provider.url}/",
        data=body,
        headers={"Content-Type": content_type, "Origin": provider.url},
        allow_redirects=False,
        timeout=5,
    )
    assert 400 == response.status_code
    assert "Set-Cookie" not in response.headers


def test_review_page_carries_the_session_csrf_token(provider: LocalProvider) -> None:
    """With the cookie, GET / serves the review page with the placeholder filled in."""
    session, csrf = signed_in(provider)
    page = session.get(f"{provider.url}/", timeout=5)
    assert "{{CSRF_TOKEN}}" not in page.text
    assert csrf in page.text
    assert_html_security_headers(page)
    # A second login gets a different session and token.
    _, other = signed_in(provider)
    assert csrf != other


@pytest.mark.parametrize("which", ["unknown", "instance"])
def test_bad_token_login_is_401_with_the_login_page(provider: LocalProvider, which: str) -> None:
    """An unknown token, or an instance credential, gets 401 and the login page; no cookie."""
    token = "agr_wrong" if which == "unknown" else provider.credential
    response = sign_in(provider.url, token)
    assert 401 == response.status_code
    assert "Set-Cookie" not in response.headers
    assert 'name="token"' in response.text
    assert_html_security_headers(response)


def test_cookie_without_csrf_header_is_403(provider: LocalProvider) -> None:
    """The session cookie alone (as a cross-site form would send) is refused: 403."""
    session, _ = signed_in(provider)
    response = session.get(f"{provider.url}/v1/requests", timeout=5)
    assert 403 == response.status_code
    assert "forbidden" == error_type(response)


def test_cookie_with_wrong_csrf_header_is_403(provider: LocalProvider) -> None:
    """A wrong X-CSRF-Token is refused too."""
    session, _ = signed_in(provider)
    response = session.get(
        f"{provider.url}/v1/requests", headers={"X-CSRF-Token": "guess"}, timeout=5
    )
    assert 403 == response.status_code


def test_cookie_with_csrf_header_can_list_and_decide(provider: LocalProvider, api: Api) -> None:
    """The page's way in: cookie plus X-CSRF-Token lists and decides like a reviewer."""
    created = api.new()
    session, csrf = signed_in(provider)
    headers = {"X-CSRF-Token": csrf}
    listed = session.get(f"{provider.url}/v1/requests", headers=headers, timeout=5)
    assert [created["id"]] == [r["id"] for r in listed.json()["requests"]]
    decided = session.post(
        f"{provider.url}/v1/requests/{created['id']}/decision",
        json={"status": "approved", "note": "from the page"},
        headers=headers,
        timeout=5,
    )
    assert 200 == decided.status_code
    assert "approved" == decided.json()["status"]


def test_unknown_cookie_is_401(provider: LocalProvider) -> None:
    """A made-up session cookie is no credential."""
    response = requests.get(
        f"{provider.url}/v1/requests",
        cookies={"ag_session": "made-up"},
        headers={"X-CSRF-Token": "x"},
        timeout=5,
    )
    assert 401 == response.status_code


def test_revoking_the_reviewer_ends_its_sessions(provider: LocalProvider) -> None:
    """A revoked reviewer credential's page session stops working."""
    session, csrf = signed_in(provider)
    reviewer = provider.store.authenticate(provider.reviewer_credential)
    assert reviewer is not None
    provider.store.revoke_credential(reviewer.id)
    response = session.get(f"{provider.url}/v1/requests", headers={"X-CSRF-Token": csrf})
    assert 401 == response.status_code


@pytest.mark.parametrize(
    ("name", "content_type"),
    [("review.js", "text/javascript"), ("review.css", "text/css"), ("login.html", "text/html")],
)
def test_static_files_have_their_content_type(
    provider: LocalProvider, name: str, content_type: str
) -> None:
    """Static files are served with the right type, nosniff and the CSP."""
    response = requests.get(f"{provider.url}/static/{name}", timeout=5)
    assert 200 == response.status_code
    assert response.headers["Content-Type"].startswith(content_type)
    assert_html_security_headers(response)


@pytest.mark.parametrize(
    "path",
    [
        "/static/../_server.py",
        "/static/%2e%2e/_server.py",
        "/static/..%2f_server.py",
        "/static/sub/file.js",
        "/static/.hidden",
        "/static/missing.js",
        "/static/review.html",
    ],
)
def test_static_refuses_traversal_and_unknown_files(provider: LocalProvider, path: str) -> None:
    """Only plain existing names are served; the raw review template is not."""
    response = requests.get(f"{provider.url}{path}", timeout=5)
    assert 404 == response.status_code


def test_login_token_never_reaches_the_log(
    provider: LocalProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither the reviewer token in the login URL nor a bearer is logged."""
    caplog.set_level(logging.DEBUG, logger="approval_guard")
    signed_in(provider)
    Api(provider.url, provider.credential).new()
    requests.get(f"{provider.url}/", params={"token": "agr_wrong_token_value"}, timeout=5)
    sign_in(provider.url, "agr_wrong_token_value")
    assert caplog.records
    assert provider.reviewer_credential not in caplog.text
    assert provider.credential not in caplog.text
    assert "agr_wrong_token_value" not in caplog.text


def test_reprs_hide_credentials(provider: LocalProvider) -> None:
    """No repr shows a token."""
    tokens = provider.store.ensure_initial_credentials()
    assert tokens is None
    text = repr(provider) + repr(provider.server) + repr(provider.store.list_credentials())
    assert provider.credential not in text
    assert provider.reviewer_credential not in text
