"""The reference clients that the guard is measured against, written with bare ``requests``."""

from __future__ import annotations

import time
import uuid
from typing import Any

import requests


class BareClient:
    """A few lines of ``requests``: create, long-poll once, or poll at a fixed interval."""

    def __init__(self, base_url: str, credential: str) -> None:
        self.base = base_url
        self.session = requests.Session()
        self.headers = {"Authorization": f"Bearer {credential}"}

    def create(self, tool: str, arguments: dict[str, Any], timeout: str = "30m") -> str:
        answer = self.session.post(
            self.base + "/v1/requests",
            json={"tool": tool, "arguments": arguments, "timeout": timeout},
            headers={**self.headers, "Idempotency-Key": str(uuid.uuid4())},
            timeout=10,
        )
        answer.raise_for_status()
        return str(answer.json()["id"])

    def long_poll(self, request_id: str, wait: int = 30) -> dict[str, Any]:
        """The floor: one long-poll GET, answered when the decision lands; parsed."""
        answer = self.session.get(
            f"{self.base}/v1/requests/{request_id}?wait={wait}s",
            headers=self.headers,
            timeout=wait + 5,
        )
        body: dict[str, Any] = answer.json()
        return body

    def poll_every(self, request_id: str, interval: float) -> tuple[dict[str, Any], int]:
        """The baseline: what approval SDKs do today, a plain GET every ``interval`` seconds.

        Returns the final request and how many GETs it took.
        """
        gets = 0
        while True:
            answer = self.session.get(
                f"{self.base}/v1/requests/{request_id}", headers=self.headers, timeout=10
            )
            gets += 1
            body: dict[str, Any] = answer.json()
            if body.get("status") != "pending":
                return body, gets
            time.sleep(interval)

    def close(self) -> None:
        self.session.close()
