"""Helpers for the local provider's integration tests."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import requests

T = TypeVar("T")

REFUND = {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}


class Api:
    """A thin HTTP client for one credential; returns raw ``requests`` responses."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.session = requests.Session()
        self.token = token

    def headers(self, **extra: str) -> dict[str, str]:
        out = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        out.update(extra)
        return out

    def create(
        self,
        *,
        tool: str = "issue_refund",
        arguments: dict[str, Any] | None = None,
        timeout: str = "30m",
        key: str | None = None,
        body: Any = None,
        redacted: list[str] | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        payload = (
            body
            if body is not None
            else {
                "tool": tool,
                "arguments": REFUND if arguments is None else arguments,
                "timeout": timeout,
            }
        )
        if redacted is not None:
            payload = {**payload, "redacted": redacted}  # API 1.3
        headers = self.headers(**{"Idempotency-Key": key or str(uuid.uuid4())})
        return self.session.post(
            f"{self.url}/v1/requests", json=payload, headers=headers, timeout=10, **kwargs
        )

    def new(self, **kwargs: Any) -> dict[str, Any]:
        response = self.create(**kwargs)
        assert response.status_code == 201, response.text
        result: dict[str, Any] = response.json()
        return result

    def poll(self, request_id: str, wait: str | None = None, **kwargs: Any) -> requests.Response:
        params = {} if wait is None else {"wait": wait}
        kwargs.setdefault("timeout", 90)
        return self.session.get(
            f"{self.url}/v1/requests/{request_id}", params=params, headers=self.headers(), **kwargs
        )

    def cancel(self, request_id: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return self.session.post(
            f"{self.url}/v1/requests/{request_id}/cancel",
            json=body,
            headers=self.headers(),
            timeout=10,
            **kwargs,
        )

    def decide(self, request_id: str, body: Any, **kwargs: Any) -> requests.Response:
        return self.session.post(
            f"{self.url}/v1/requests/{request_id}/decision",
            json=body,
            headers=self.headers(),
            timeout=10,
            **kwargs,
        )

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 90)
        return self.session.get(f"{self.url}{path}", headers=self.headers(), **kwargs)

    def post_raw(self, path: str, data: bytes, **headers: str) -> requests.Response:
        return self.session.post(
            f"{self.url}{path}", data=data, headers=self.headers(**headers), timeout=10
        )


def sign_in(
    url: str,
    token: str,
    *,
    session: requests.Session | None = None,
    request: str | None = None,
    headers: dict[str, str] | None = None,
) -> requests.Response:
    """The review page's sign-in: the token posted as the provider's own form does (not followed).

    ``headers`` stand for what a browser adds (``Origin``, ``Sec-Fetch-Site``);
    by default the provider's own origin.
    """
    fields = {"token": token} if request is None else {"token": token, "request": request}
    return (session or requests.Session()).post(
        f"{url}/",
        data=fields,
        headers={"Origin": url, **(headers or {})},
        allow_redirects=False,
        timeout=10,
    )


def signed_in(provider: Any) -> tuple[requests.Session, str]:
    """A browser-like session after the token sign-in, and the page's CSRF token."""
    session = requests.Session()
    answer = sign_in(provider.url, provider.reviewer_credential, session=session)
    assert 303 == answer.status_code, answer.text
    response = session.get(f"{provider.url}/", timeout=10)
    assert 200 == response.status_code
    match = re.search(r'<meta name="csrf-token" content="([^"]+)">', response.text)
    assert match is not None
    return session, match.group(1)


def error_type(response: requests.Response) -> str:
    body = response.json()
    assert set(body["error"]) == {"type", "message"}
    assert isinstance(body["error"]["message"], str)
    result: str = body["error"]["type"]
    return result


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread; its result (or exception) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def wait_for(
    read: Callable[[], T],
    ok: Callable[[T], object] = bool,
    *,
    timeout: float = 10.0,
    what: str = "",
) -> T:
    """``read()`` once ``ok`` holds of it, looked at again and again; AssertionError at ``timeout``.

    The tests' one wait on a condition something else makes true (a row
    settled, a file written, a port listening). Nothing waits longer than the
    condition takes, and a condition never met fails the test with ``what``.
    """
    end = time.monotonic() + timeout
    looked = threading.Event()  # never set: its wait is the pause between looks
    while True:
        value = read()
        if ok(value):
            return value
        assert time.monotonic() < end, what or f"not met within {timeout} s: {value!r}"
        looked.wait(0.005)


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """True as soon as ``condition()`` holds; False after ``timeout`` (a bounded test wait)."""
    try:
        wait_for(condition, timeout=timeout)
    except AssertionError:
        return bool(condition())
    return True


def create_from_text(provider: Any, body: str | bytes) -> str:
    """Create a request from its body as JSON text (numbers Python cannot write); its id."""
    response = requests.post(
        f"{provider.url}/v1/requests",
        data=body.encode() if isinstance(body, str) else body,
        headers={
            "Authorization": f"Bearer {provider.credential}",
            "Idempotency-Key": str(uuid.uuid4()),
            "Content-Type": "application/json",
        },
        timeout=5,
    )
    assert 201 == response.status_code, response.text
    request_id: str = response.json()["id"]
    return request_id
