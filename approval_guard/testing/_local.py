"""LocalProvider: the real local provider on 127.0.0.1 in-process, behind a fault proxy."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from approval_guard._codec.duration import to_timedelta
from approval_guard._codec.now import utcnow
from approval_guard._codec.wire import APPROVED, DENIED, PENDING
from approval_guard._codec.wire_models import ApprovalRequest
from approval_guard.provider.channels import decisions as channel_decisions
from approval_guard.provider.http.limits import DEFAULT_POLL_CAP
from approval_guard.provider.rules.config import Rules
from approval_guard.provider.serving.lifecycle import ProviderServer
from approval_guard.provider.store.models import (
    INSTANCE,
    REVIEWER,
    Credential,
    History,
    NotPendingError,
    StoreClosedError,
)
from approval_guard.provider.store.opening import Store
from approval_guard.testing._faults import Faults, Stats
from approval_guard.testing._policies import Policy, Validity
from approval_guard.testing._proxy import FaultProxy

logger = logging.getLogger("approval_guard.provider")


_TESTING_TABLE = """
CREATE TABLE IF NOT EXISTS testing_credentials (
    kind  TEXT PRIMARY KEY,
    token TEXT NOT NULL
)
"""


class LocalProvider:
    """The local provider, running in-process on 127.0.0.1, driven by the test.

    Public attributes: :attr:`url`, :attr:`credential` (an instance
    credential), :attr:`reviewer_credential`, :attr:`faults`, :attr:`stats`,
    :attr:`store`, :attr:`server`.

    Args:
        db: ``":memory:"`` (default) or a SQLite file path.
        clock_offset: How far the provider's clock is ahead of the system's
            (negative: behind). Settable later through :attr:`clock_offset`.
        policy: Decides each new request in a background thread, e.g.
            :func:`approve_after` ``(0.1)``; settable later through :attr:`policy`.
        poll_cap: The most a long poll waits, in seconds.
        rules: Per-tool review rules (who may decide, how many must approve,
            ``self_approval``, ``max_valid_for``): a rules file's path or a
            ``Rules``, as ``serve --rules``. :meth:`approve` and :meth:`deny`
            keep them too, as the testing reviewer (named ``testing reviewer``,
            no roles): with ``approvers`` set, or several approvals required,
            decide as named reviewers instead (``provider.store.add_reviewer(name,
            roles=[...])`` gives a token for ``POST /v1/requests/{id}/decision``).
    """

    def __init__(
        self,
        db: str = ":memory:",
        *,
        clock_offset: timedelta = timedelta(0),
        policy: Policy | Callable[[LocalProvider, ApprovalRequest], None] | None = None,
        poll_cap: float = DEFAULT_POLL_CAP,
        rules: Rules | str | os.PathLike[str] | None = None,
    ) -> None:
        self.db = str(db)
        self.clock_offset = clock_offset
        self.policy = policy
        self._memory = self.db == ":memory:"
        self._exiting = threading.Event()
        self._running = threading.Event()
        self._policy_thread: threading.Thread | None = None
        self._returned: set[str] = set()
        self._policy_seen: set[str] = set()
        self._lock = threading.Lock()

        store = Store(self.db, clock=self._now)
        self.credential, self.reviewer_credential = _testing_credentials(store)
        if self._memory:
            # The server must not close an in-memory store on stop(): it is all there is.
            self._server = ProviderServer(store, poll_cap=poll_cap, rules=rules)
        else:
            store.close()
            self._server = ProviderServer(self.db, clock=self._now, poll_cap=poll_cap, rules=rules)
        self._memory_store = store if self._memory else None
        # Faults happen at the edge: the proxy in front of the server is the URL tests get.
        self._proxy = FaultProxy(self._server.url, clock=self._now)

    def _now(self) -> datetime:
        return utcnow() + self.clock_offset

    def __repr__(self) -> str:
        # Never the credentials.
        return f"LocalProvider(url={self.url!r}, db={self.db!r})"

    # ------------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """The provider's base URL, ``http://127.0.0.1:PORT`` (kept across restarts)."""
        return self._proxy.url

    @property
    def proxy(self) -> FaultProxy:
        """The :class:`FaultProxy` in front of the server (what :attr:`url` reaches)."""
        return self._proxy

    @property
    def server(self) -> ProviderServer:
        """The underlying :class:`~approval_guard.provider.ProviderServer`."""
        return self._server

    @property
    def store(self) -> Store:
        """The current store (a new object after a restart on a file)."""
        store = self._server.store
        assert isinstance(store, Store)  # a LocalProvider always runs on SQLite
        return store

    @property
    def faults(self) -> Faults:
        """Fault injection: ``provider.faults.add("drop_after_commit", on="create")``."""
        return self._proxy.faults

    @property
    def stats(self) -> Stats:
        """Exchange counters: ``provider.stats.creates``, ``.polls``, ``.cancels`` ..."""
        return self._proxy.stats

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LocalProvider:
        """Start serving (again, after :meth:`stop`: same port, same database)."""
        self._server.start()
        self._proxy.start()
        self._running.set()
        if self._policy_thread is None:
            self._policy_thread = threading.Thread(
                target=self._policy_loop, name="approval-guard-policy", daemon=True
            )
            self._policy_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, as a killed provider would: open connections are cut."""
        self._running.clear()
        self._proxy.stop()
        self._server.stop()

    def close(self) -> None:
        """Stop for good and release the database."""
        self._exiting.set()
        self.stop()
        self._running.set()  # let the policy thread see _exiting
        if self._memory_store is not None:
            self._memory_store.close()
        if self._policy_thread is not None:
            self._policy_thread.join(5)

    def __enter__(self) -> LocalProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def requests(self, status: str | None = None) -> list[ApprovalRequest]:
        """Every request (or those with ``status``), newest first.

        Args:
            status: Only requests with this status (``"pending"``, ...); None: every one.
        """
        return self.store.list_requests(status=status)

    def get(self, request_id: str) -> ApprovalRequest:
        """The current state of one request; ``LookupError`` if unknown.

        Args:
            request_id: The request's id.
        """
        request = self.store.get_request(request_id)
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def history(self, request_id: str) -> History:
        """A request's audit trail; ``LookupError`` if unknown.

        Args:
            request_id: The request's id.
        """
        history = self.store.history(request_id)
        if history is None:
            raise LookupError(f"no request {request_id!r}")
        return history

    def next_request(self, timeout: float = 5.0) -> ApprovalRequest:
        """Block until a pending request appears that this method has not returned before.

        Oldest first. Raises ``TimeoutError`` after ``timeout`` seconds.

        Args:
            timeout: Seconds to wait for one.
        """
        return self._next_unseen(self._returned, timeout)

    def wait_for_polls(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` long polls are waiting; False on timeout.

        Args:
            n: How many long polls must be waiting.
            timeout: Seconds to wait for them.
        """
        return self._server.wait_for_waiting_polls(n, timeout)

    def _next_unseen(self, seen: set[str], timeout: float) -> ApprovalRequest:
        end = time.monotonic() + timeout
        while True:
            store = self.store
            seq = store.seq
            for request in reversed(store.list_requests(status=PENDING)):
                with self._lock:
                    if request.id not in seen:
                        seen.add(request.id)
                        return request
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no new pending request within {timeout} s")
            if not self._running.is_set():
                raise StoreClosedError("the provider is stopped")
            # Sleeps until something changes: no polling.
            store.wait_for_change(
                after=seq, timeout=remaining, should_stop=lambda: not self._running.is_set()
            )

    # ------------------------------------------------------------------ deciding

    def _reviewer(self) -> Credential:
        reviewer = self.store.authenticate(self.reviewer_credential)
        assert reviewer is not None, "the testing reviewer credential was revoked"
        return reviewer

    def approve(
        self,
        request_id: str,
        *,
        note: str | None = None,
        valid_for: Validity | None = None,
        expires_at: datetime | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> ApprovalRequest:
        """Approve a pending request, as the testing reviewer.

        ``valid_for`` is a duration string, a ``timedelta`` or seconds (default
        ``5m``); zero or negative makes an approval that has already expired.
        ``expires_at`` sets the expiry outright. ``arguments`` is the whole
        arguments object with the reviewer's edits applied (API 1.1; only names
        the request lists as ``editable`` may change, else ``ValueError``).
        Raises ``NotPendingError`` if not pending, ``LookupError`` if unknown,
        and the store's ``Forbidden`` / ``AlreadyApproved`` when the rules refuse it.

        Args:
            request_id: The request's id.
            note: The reviewer's note.
            valid_for: How long the approval stays valid: a duration string, a ``timedelta`` or
                seconds (default ``5m``); zero or negative makes one already expired.
            expires_at: The approval's expiry outright (aware UTC), instead of ``valid_for``.
            arguments: The whole arguments object with the reviewer's edits applied (API 1.1).
        """
        request, _ = channel_decisions.decide(
            self.store,
            self._server.rules,
            request_id,
            self._reviewer(),
            APPROVED,
            note=note,
            valid_for=to_timedelta("5m" if valid_for is None else valid_for, name="valid_for"),
            expires_at=expires_at,
            arguments=arguments,
            source="api",
            channel="api",
        )
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def deny(self, request_id: str, note: str | None = None) -> ApprovalRequest:
        """Deny a pending request, as the testing reviewer (``NotPendingError`` if not pending).

        Args:
            request_id: The request's id.
            note: The reviewer's note.
        """
        request, _ = channel_decisions.decide(
            self.store,
            self._server.rules,
            request_id,
            self._reviewer(),
            DENIED,
            note=note,
            source="api",
            channel="api",
        )
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    def cancel(self, request_id: str, reason: str | None = None) -> ApprovalRequest:
        """Cancel a pending request, as if its instance withdrew it.

        Args:
            request_id: The request's id.
            reason: Why, as the instance would say it.
        """
        request = self.store.cancel(request_id, owner=self._reviewer(), reason=reason)
        if request is None:
            raise LookupError(f"no request {request_id!r}")
        return request

    # ------------------------------------------------------------------ policy

    def _sleep(self, seconds: float) -> bool:
        """Sleep, cut short by close(); True if the provider is still open."""
        return not self._exiting.wait(seconds)

    def _policy_loop(self) -> None:
        while not self._exiting.is_set():
            self._running.wait()
            if self._exiting.is_set():
                return
            try:
                request = self._next_unseen(self._policy_seen, 3600.0)
            except (StoreClosedError, TimeoutError):
                continue
            except Exception:
                logger.exception("the testing policy loop failed; retrying")
                continue
            policy = self.policy
            if policy is None:
                continue
            threading.Thread(
                target=self._apply_policy,
                args=(policy, request),
                name="approval-guard-policy-decision",
                daemon=True,
            ).start()

    def _apply_policy(
        self, policy: Callable[[LocalProvider, ApprovalRequest], None], request: ApprovalRequest
    ) -> None:
        try:
            policy(self, request)
        except (NotPendingError, StoreClosedError):
            pass
        except Exception:
            logger.exception("a testing policy raised for request %s", request.id)


def _testing_credentials(store: Store) -> tuple[str, str]:
    """The testing instance and reviewer tokens of this database, made on first use."""
    with store.transaction() as db:
        db.execute(_TESTING_TABLE)
        rows = dict(db.execute("SELECT kind, token FROM testing_credentials").fetchall())
    tokens: dict[str, str] = {}
    for kind in (INSTANCE, REVIEWER):
        token = rows.get(kind)
        credential = store.authenticate(token) if token else None
        if token is None or credential is None or credential.kind != kind:
            token = store.create_credential(kind, f"testing {kind}")
            with store.transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO testing_credentials (kind, token) VALUES (?, ?)",
                    (kind, token),
                )
        tokens[kind] = token
    return tokens[INSTANCE], tokens[REVIEWER]
