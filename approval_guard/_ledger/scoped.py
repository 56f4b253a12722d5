"""One provider's view of an execution record: request ids scoped by the provider's URL."""

from __future__ import annotations

import ipaddress
import urllib.parse
from contextlib import suppress
from datetime import timedelta

import attrs

from approval_guard._ledger.protocol import Execution, Ledger, check_digest


class ProviderLedger:
    """One provider's view of an execution record: request ids are scoped by provider.

    Two providers may both hand out id ``1``; in the underlying record a row is
    keyed ``"<provider URL> <request id>"`` (a URL has no spaces), so their
    calls never share a claim. Through this view the ids are the provider's own.
    """

    def __init__(self, record: Ledger, provider: str) -> None:
        if any(ch.isspace() for ch in provider):
            raise ValueError("a provider URL has no whitespace")
        self.record = record
        self.provider = provider
        self._prefix = provider + " "

    def __repr__(self) -> str:
        return repr(self.record)

    def key(self, request_id: str) -> str:
        """The row's key in the underlying record."""
        return self._prefix + request_id

    def _own(self, row: Execution | None) -> Execution | None:
        if row is None or not row.request_id.startswith(self._prefix):
            return None
        return attrs.evolve(row, request_id=row.request_id[len(self._prefix) :])

    def claim(
        self, request_id: str, *, tool: str, worker: str, arguments_digest: str | None = None
    ) -> bool:
        # (The key written out here and below, not by key(): claim and finish run on
        # every guarded call.)
        return self.record.claim(
            self._prefix + request_id,
            tool=tool,
            worker=worker,
            arguments_digest=check_digest(arguments_digest),
        )

    def finish(self, request_id: str) -> None:
        self.record.finish(self._prefix + request_id)

    def fail(self, request_id: str, error: str) -> None:
        self.record.fail(self.key(request_id), error)

    def release(self, request_id: str) -> None:
        self.record.release(self.key(request_id))

    def get(self, request_id: str) -> Execution | None:
        return self._own(self.record.get(self.key(request_id)))

    def recent(self, limit: int = 50) -> list[Execution]:
        """This provider's rows among the record's newest ``limit``, newest first."""
        rows = (self._own(row) for row in self.record.recent(limit))
        return [row for row in rows if row is not None]

    def prune(self, older_than: timedelta) -> int:
        """Prunes the whole record (every provider's rows), as its own ``prune`` does."""
        return self.record.prune(older_than)


def provider_scope(base_url: str) -> str:
    """The provider's identity in the execution record: scheme, host and port, then the path."""
    parts = urllib.parse.urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # One host, one spelling: no trailing dot (an absolute DNS name), an address in its
    # canonical form (``[0:0:0:0:0:0:0:1]`` is ``[::1]``), so one provider is one scope.
    host = (parts.hostname or "").lower().rstrip(".")
    with suppress(ValueError):
        host = ipaddress.ip_address(host).compressed
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"
