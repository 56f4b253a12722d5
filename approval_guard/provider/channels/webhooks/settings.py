"""What a server delivers webhooks with: targets, public URL, retry policy; from a command line."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from approval_guard.provider.channels.base import Backoff, ChannelKind
from approval_guard.provider.channels.public_url import check_public_url
from approval_guard.provider.channels.webhooks.signing import (
    FORMATS,
    WebhookTarget,
    check_url,
    display_url,
    parse_secret,
)
from approval_guard.provider.channels.webhooks.targets import (
    NO_ROUTES,
    WebhookRoutes,
    webhook_routes,
)
from approval_guard.provider.rules.config import NO_RULES, Rules

#: ``approvers(event) -> names or roles | None`` (None: any reviewer).
Approvers = Callable[[dict[str, Any]], list[str] | None]


@attrs.frozen
class WebhookSettings:
    """What the server delivers: targets, the review page's public URL, the retry policy."""

    targets: tuple[WebhookTarget, ...]
    public_url: str | None = None
    backoff: Backoff = attrs.field(factory=Backoff)
    #: ``approvers(event) -> names`` for the Slack text's "who must approve" (else any reviewer).
    approvers: Approvers | None = None
    #: Which targets each tool's events are queued for (what the store is given).
    routes: WebhookRoutes = NO_ROUTES


def approvers_from_rules(rules: Rules) -> Approvers:
    """``approvers(event)``: the roles the event's tool's rule names (None: any reviewer).

    With the event's ``approvals_required`` the Slack text then says, e.g.,
    "2 approvals from: payments".
    """

    def approvers(event: dict[str, Any]) -> list[str] | None:
        tool = event.get("data", {}).get("tool")
        if not isinstance(tool, str):
            return None
        roles = rules.for_tool(tool).approvers
        return None if roles is None else list(roles)

    return approvers


def webhook_settings(
    targets: Sequence[WebhookTarget],
    public_url: str | None,
    backoff: float,
    give_up_after: float,
    approvers: Approvers | None,
    rules: Rules = NO_RULES,
) -> WebhookSettings:
    """``ProviderServer``'s webhook options and its rules file's, checked.

    ``ValueError`` or ``TypeError`` for a bad one.

    The targets are ``targets`` (every tool's events) and the rules file's
    ``webhooks`` (only their tools'); without ``approvers``, the rules say who
    must approve.
    """
    targets = tuple(targets)
    for target in targets:
        if not isinstance(target, WebhookTarget):
            raise TypeError(f"webhooks must be WebhookTarget objects, not {type(target).__name__}")
    routes = webhook_routes(targets, rules)
    if approvers is None:
        approvers = approvers_from_rules(rules)
    for name, value in (("webhook_backoff", backoff), ("webhook_give_up_after", give_up_after)):
        if not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    if public_url is not None:
        public_url = check_public_url(public_url)
    return WebhookSettings(
        targets=routes.targets,
        public_url=public_url,
        backoff=Backoff(base=float(backoff), give_up_after=float(give_up_after)),
        approvers=approvers,
        routes=routes,
    )


# ---------------------------------------------------------------------- command lines


class _WebhookOption(argparse.Action):
    """``--webhook URL [--webhook-secret S] [--webhook-format F]``, each after its webhook."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        given: list[dict[str, Any]] = list(getattr(namespace, self.dest, None) or [])
        if option_string == "--webhook":
            try:
                check_url(text)
            except ValueError as exc:
                parser.error(f"--webhook: {exc}")
            if any(item["url"] == text for item in given):
                parser.error(f"--webhook {display_url(text)} is given twice")
            given.append({"url": text, "secret": None, "format": "standard"})
        else:
            if not given:
                parser.error(f"{option_string} must follow the --webhook it is for")
            last = given[-1]
            if option_string == "--webhook-secret":
                if last["secret"] is not None:
                    parser.error("one --webhook-secret per --webhook")
                try:
                    last["secret"] = parse_secret(text)
                except ValueError as exc:  # its message never quotes the secret
                    parser.error(f"--webhook-secret: {exc}")
            else:
                if text not in FORMATS:
                    parser.error(f"--webhook-format is one of {', '.join(FORMATS)}")
                last["format"] = text
        setattr(namespace, self.dest, given)


def _public_url(text: str) -> str:
    try:
        return check_public_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class WebhooksKind(ChannelKind):
    """Webhooks: their serve flags (``--webhook``, ``--public-url``...); they link nobody."""

    name: ClassVar[str] = "webhooks"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
        del env
        add_webhook_arguments(parser)


def add_webhook_arguments(parser: argparse.ArgumentParser) -> None:
    """``--webhook``, ``--webhook-secret``, ``--webhook-format``, ``--public-url``.

    ``--webhook`` may be repeated; a ``--webhook-secret`` or ``--webhook-format``
    applies to the ``--webhook`` just before it (one given before any webhook is
    a usage error, exit 2, as is a malformed secret or URL).
    """
    parser.add_argument(
        "--webhook",
        action=_WebhookOption,
        dest="webhooks",
        metavar="URL",
        help="post every request's events (created, decided, expired, cancelled) to this "
        "http(s) URL; repeatable",
    )
    parser.add_argument(
        "--webhook-secret",
        action=_WebhookOption,
        dest="webhooks",
        metavar="SECRET",
        help="sign the --webhook before it (Standard Webhooks): whsec_ + base64 of a key",
    )
    parser.add_argument(
        "--webhook-format",
        action=_WebhookOption,
        dest="webhooks",
        metavar="FORMAT",
        help="the body of the --webhook before it: standard (default) or slack",
    )
    parser.add_argument(
        "--public-url",
        type=_public_url,
        default=None,
        metavar="URL",
        help="the review page's address as people reach it; events link to URL/?request=ID",
    )


def targets_from_args(args: argparse.Namespace) -> tuple[WebhookTarget, ...]:
    """The targets :func:`add_webhook_arguments` read."""
    return tuple(
        WebhookTarget(item["url"], item["secret"], item["format"])
        for item in getattr(args, "webhooks", None) or ()
    )
