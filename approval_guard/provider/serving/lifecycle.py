"""Running the provider: :class:`ProviderServer` binds, serves on uvicorn, and stops.

The socket is bound when the object is made, so :attr:`ProviderServer.url` is
known before serving. ``start()`` runs uvicorn's server on its own event loop
in a background thread; ``serve_forever()`` in the calling one. To stop:

- :meth:`ProviderServer.shutdown` is graceful (``serve`` does it on SIGTERM or
  Ctrl-C): it stops accepting, answers every waiting poll at once with the
  request's current state, lets answers in flight finish (at most
  :data:`GRACEFUL_SECONDS`), then stops. Nothing answered is lost: the store
  commits before it answers.
- :meth:`ProviderServer.stop` is a kill, for tests: the listener and every
  open connection are closed at once, and waiting polls get no answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn

from approval_guard.provider.channels.base import Channel
from approval_guard.provider.channels.email.settings import EmailSettings, routes_for
from approval_guard.provider.channels.slack.settings import SlackSettings, slack_settings
from approval_guard.provider.channels.webhooks.settings import webhook_settings
from approval_guard.provider.channels.webhooks.signing import WebhookTarget
from approval_guard.provider.http.app import build_app
from approval_guard.provider.http.context import Context
from approval_guard.provider.http.limits import (
    DEFAULT_POLL_CAP,
    GRACEFUL_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_HEAD_BYTES,
    SLOW_CLIENT_SECONDS,
)
from approval_guard.provider.http.protocols import check_parser, protocol_class
from approval_guard.provider.rules.config import NO_RULES, Rules, load_rules
from approval_guard.provider.serving.channels import given_channels, server_channels
from approval_guard.provider.serving.uvicorn_server import UvicornServer, bind
from approval_guard.provider.store.models import Clock, FirstStartTokens
from approval_guard.provider.store.opening import Store
from approval_guard.provider.store.protocol import StoreProtocol

logger = logging.getLogger("approval_guard.provider")


class ProviderServer:
    """The local approval provider: docs/provider-api.md, the review page and its backend.

    :param db: a SQLite file path (created if missing), ``":memory:"``, or an
        open store (:class:`Store` or a PostgreSQL one), which the server then
        uses but does not close.
    :param host: the address to bind; loopback by default.
    :param port: the port; 0 picks a free one (see :attr:`url`).
    :param clock: the provider's clock (aware UTC datetimes); ignored for a
        store argument, which has its own.
    :param poll_cap: the most a long poll waits, in seconds (API: 60).
    :param instance_token: / :param reviewer_token: known credentials to create
        on a fresh database (containers, CI); on one that has credentials, each
        given token must already be one (else ``ValueError``).
    :param tls_certfile: / :param tls_keyfile: serve HTTPS with this PEM
        certificate and key.
    :param keep_alive_seconds: an idle keep-alive connection is closed after this.
    :param client_timeout_seconds: a client must send a request head, and then
        its body, within this (a slow-drip client is disconnected; it never
        delays anyone else meanwhile).
    :param rules: per-tool review rules: a rules file (TOML, read now; a bad
        one raises :class:`~approval_guard.provider.rules.config.RulesError` naming
        its line) or :class:`~approval_guard.provider.rules.config.Rules`.
    :param webhooks: :class:`WebhookTarget` s to post every request's events to
        (created, decided, expired, cancelled), signed, from a persistent
        outbox: an event is queued in the change's own transaction and retried
        until delivered, across restarts (give the same targets again).
    :param public_url: the review page's address as people reach it; events
        then link to ``PUBLIC_URL/?request=<id>``.
    :param webhook_backoff: seconds before the first retry (doubling, at most
        :attr:`Backoff.cap`); tests pass a small one.
    :param webhook_give_up_after: seconds after the event when retrying stops.
    :param webhook_approvers: ``f(event) -> [names] | None``: who must approve,
        for the Slack text (else the roles of the tool's rule, or "any reviewer").
    :param slack: a Slack app (:class:`SlackSettings`): each request is posted
        to its channel with Approve / Deny buttons, kept current through the
        outbox, and decided at ``POST /slack/interactions`` (docs/slack.md).
    :param email: mail each new request's one-click approve and deny links
        (:func:`~approval_guard.provider.channels.email.settings.email_settings`; docs/email.md),
        from a persistent outbox like the webhooks'. The links point at the
        settings' ``public_url``, else ``public_url``, else :attr:`url`.
    :param http_parser: "auto" (httptools when installed, else h11), "httptools" or "h11".

    A rules file's ``webhooks`` (per tool, or in ``[defaults]``) are delivered
    like ``webhooks`` but only for the events of the tools whose rule lists them.

    On a database without credentials one instance and one reviewer credential
    are made; their plaintext tokens are in :attr:`first_start_tokens` (else
    None) and are stored only hashed. A stopped server can be started again:
    it reopens its database file and binds the same port. ``close()`` stops
    for good; leaving a ``with`` block calls it.
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | StoreProtocol = "approvals.sqlite3",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
        poll_cap: float = DEFAULT_POLL_CAP,
        instance_token: str | None = None,
        reviewer_token: str | None = None,
        tls_certfile: str | None = None,
        tls_keyfile: str | None = None,
        keep_alive_seconds: float = KEEP_ALIVE_SECONDS,
        client_timeout_seconds: float = SLOW_CLIENT_SECONDS,
        rules: Rules | str | os.PathLike[str] | None = None,
        webhooks: Sequence[WebhookTarget] = (),
        public_url: str | None = None,
        webhook_backoff: float = 5.0,
        webhook_give_up_after: float = 24 * 3600.0,
        webhook_approvers: Callable[[dict[str, Any]], list[str] | None] | None = None,
        slack: SlackSettings | None = None,
        email: EmailSettings | None = None,
        channels: Sequence[Channel] = (),
        http_parser: str = "auto",
    ) -> None:
        self._http_parser = check_parser(http_parser)
        if poll_cap < 0 or not math.isfinite(poll_cap):
            raise ValueError(f"poll_cap must be a non-negative number of seconds, not {poll_cap!r}")
        for name, value in (
            ("keep_alive_seconds", keep_alive_seconds),
            ("client_timeout_seconds", client_timeout_seconds),
        ):
            if not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if rules is None:
            rules = NO_RULES
        elif not isinstance(rules, Rules):
            rules = load_rules(os.fspath(rules))
        #: The per-tool review rules this server enforces.
        self.rules: Rules = rules
        self._webhooks = webhook_settings(
            webhooks,
            public_url,
            webhook_backoff,
            webhook_give_up_after,
            webhook_approvers,
            rules,
        )
        self._slack = slack_settings(slack, rules)
        self._email = email
        self._email_routes = routes_for(email, rules)
        self._keep_alive = float(keep_alive_seconds)
        self._client_timeout = float(client_timeout_seconds)
        if (tls_certfile is None) != (tls_keyfile is None):
            raise ValueError("TLS needs both a certificate file and a key file")
        self.poll_cap = float(poll_cap)
        self._clock = clock
        self._tls = (tls_certfile, tls_keyfile) if tls_certfile and tls_keyfile else None
        given = given_channels(channels)  # checked before a database is opened
        if isinstance(db, (str, os.PathLike)):
            self._db_path: str | None = os.fspath(db)
            self._store: StoreProtocol = Store(self._db_path, clock=clock)
        else:
            self._db_path = None
            self._store = db
        self._channels: tuple[Channel, ...] = ()
        try:
            #: Plaintext tokens made on this start of a fresh database, else None.
            self.first_start_tokens: FirstStartTokens | None = (
                self._store.ensure_initial_credentials(
                    instance_token=instance_token, reviewer_token=reviewer_token
                )
            )
            self._host = host
            self._sock: socket.socket | None = bind(host, port)
        except BaseException:
            if self._db_path is not None:
                self._store.close()
            raise
        self._port: int = self._sock.getsockname()[1]
        try:
            self._channels = server_channels(
                webhooks=self._webhooks,
                slack=self._slack,
                email=self._email,
                email_routes=self._email_routes,
                rules=self.rules,
                url=self.url,
                given=given,
            )
        except BaseException:
            self._sock.close()
            if self._db_path is not None:
                self._store.close()
            raise
        self._store.set_channels(self._channels, self.rules)
        self._lock = threading.Lock()
        self._server: UvicornServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._notice: str | None = None
        logger.info("provider bound to %s", self.url)

    # ------------------------------------------------------------- properties

    @property
    def store(self) -> StoreProtocol:
        """The store being served (a new object after a stop/start on a file)."""
        return self._store

    @property
    def url(self) -> str:
        """``http(s)://HOST:PORT`` of this server (no trailing slash)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{'https' if self._tls else 'http'}://{host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    @property
    def stopping(self) -> bool:
        """True from the moment a stop begins until the next start."""
        return self._stopping

    @property
    def running(self) -> bool:
        """True while serving (after a start that succeeded, until a stop)."""
        server, thread = self._server, self._thread
        return (
            server is not None
            and server.started
            and (thread is None or thread.is_alive() or thread is threading.current_thread())
        )

    def __repr__(self) -> str:
        return f"ProviderServer(url={self.url!r}, db={self._db_path or self._store.path!r})"

    def _context(self) -> Context | None:
        server = self._server
        if server is None or not server.ready.is_set():
            return None
        ctx: Context | None = getattr(server.app.state, "ctx", None)
        return ctx

    @property
    def waiting_polls(self) -> int:
        """How many long polls are waiting right now (0 when not serving)."""
        ctx = self._context()
        return 0 if ctx is None else ctx.notifier.waiting_polls

    def wait_for_waiting_polls(self, n: int, timeout: float) -> bool:
        """Block until at least ``n`` polls wait; False on timeout or when not serving."""
        ctx = self._context()
        return False if ctx is None else ctx.notifier.wait_for_waiting_polls(n, timeout)

    @property
    def notice(self) -> str | None:
        """A line the review page shows in its banner (the demo: "finished"), or None."""
        return self._notice

    @notice.setter
    def notice(self, text: str | None) -> None:
        self._notice = text
        ctx = self._context()
        if ctx is not None:
            ctx.notice = text
            ctx.notice_delivered = False
            ctx.notifier.poke()  # the page's change feed hears it at once

    @property
    def review_page_opened(self) -> bool:
        """True once the review page was served (to a signed-in reviewer) since the start."""
        ctx = self._context()
        return ctx is not None and ctx.page_served

    def page_caught_up(self, seq: int) -> bool:
        """True once a reviewer was sent the requests as of change ``seq`` and the notice."""
        ctx = self._context()
        return (
            ctx is not None
            and ctx.listed_seq >= seq
            and (ctx.notice is None or ctx.notice_delivered)
        )

    # ------------------------------------------------------------- lifecycle

    def _prepare(self) -> tuple[UvicornServer, socket.socket]:
        with self._lock:
            if self._server is not None:
                raise RuntimeError("the provider is already running")
            if self._store.closed:
                if self._db_path is None:
                    raise RuntimeError("the store this server was given has been closed")
                self._store = Store(self._db_path, clock=self._clock)
                self._store.set_channels(self._channels, self.rules)
            if self._sock is None:
                self._sock = bind(self._host, self._port)
            sock = self._sock
            app = build_app(
                self._store,
                poll_cap=self.poll_cap,
                notice=self._notice,
                client_timeout=self._client_timeout,
                rules=self.rules,
                channels=self._channels,
                backoff=self._webhooks.backoff,
                slack_app=self._slack,
            )
            config = uvicorn.Config(
                app,
                http=protocol_class(self._client_timeout, parser=self._http_parser),
                lifespan="on",
                log_config=None,
                log_level="warning",
                access_log=False,
                server_header=False,
                date_header=False,
                timeout_keep_alive=self._keep_alive,  # type: ignore[arg-type]
                h11_max_incomplete_event_size=MAX_HEAD_BYTES,
                backlog=2048,
                ssl_certfile=None if self._tls is None else self._tls[0],
                ssl_keyfile=None if self._tls is None else self._tls[1],
            )
            server = self._server = UvicornServer(config, app)
            self._stopping = False
            return server, sock

    def _run(self, server: UvicornServer, sock: socket.socket) -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException:  # SystemExit from a failed startup included
            logger.exception("the provider at %s stopped with an error", self.url)
        finally:
            server.ready.set()
            with contextlib.suppress(OSError):
                sock.close()

    @property
    def channels(self) -> tuple[Channel, ...]:
        """The channels this server sends through and takes decisions from."""
        return self._channels

    def start(self) -> ProviderServer:
        """Serve in a background thread; returns self once it accepts requests."""
        server, sock = self._prepare()
        self._thread = threading.Thread(
            target=self._run, args=(server, sock), name="approval-guard-provider", daemon=True
        )
        self._thread.start()
        server.ready.wait(30)
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until a stop, SIGTERM or Ctrl-C (a graceful stop)."""
        if self._thread is not None:
            self._thread.join()
            return
        server, sock = self._prepare()
        self._thread = threading.current_thread()
        try:
            self._run(server, sock)
        finally:
            self._finish(server)

    def _end(self, *, graceful: bool) -> None:
        with self._lock:
            server, self._server = self._server, None
            thread, self._thread = self._thread, None
            self._stopping = True
        if server is None:
            return
        self._sock = None  # uvicorn closes the listener; a restart binds the port again
        server.request_stop(graceful=graceful)
        if thread is not None and thread is not threading.current_thread():
            thread.join(GRACEFUL_SECONDS + 5 if graceful else 5)
            if thread.is_alive():
                logger.warning("the provider at %s did not stop in time", self.url)
        self._finish(server)

    def _finish(self, server: UvicornServer) -> None:
        if self._db_path is not None and self._db_path != ":memory:":
            # A restart reopens the file, as a new process would. An in-memory
            # database is all there is, so it stays open until close().
            self._store.close()
        logger.info("provider at %s stopped", self.url)

    def stop(self) -> None:
        """Stop as a kill would (connections cut); a message in flight gets 3 s to be recorded."""
        self._end(graceful=False)

    def shutdown(self) -> None:
        """Stop gracefully: waiting polls are answered with the current state first."""
        self._end(graceful=True)

    def close(self) -> None:
        """Stop, and close the database this server opened (it cannot be started again)."""
        self.stop()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._db_path is not None:
            self._store.close()

    def __enter__(self) -> ProviderServer:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
