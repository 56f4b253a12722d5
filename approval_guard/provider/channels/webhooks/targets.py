"""Which webhook targets hear a request's events: every tool's, and the tool's own from the rules.

A target given to the server (``serve --webhook``, ``ProviderServer(webhooks=)``)
hears every tool's events; one in a rules file (``[tools.X] webhooks = [...]``,
or ``[defaults]`` for every tool without its own list) hears only the events
of the tools whose rule lists it. The outbox names a target by URL, so one URL
is one target: given in both places, or in several tables, it must have the
same secret and format each time (else ``ValueError`` at start), and it is
then queued once per event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from approval_guard.provider.channels.webhooks.signing import (
    WebhookTarget,
    display_url,
    parse_secret,
)
from approval_guard.provider.rules.config import NO_RULES, Rules


@attrs.frozen(repr=False)
class WebhookRoutes:
    """The targets a store queues events for, and which of them each tool's events go to."""

    #: Targets that hear every tool's events.
    everywhere: tuple[WebhookTarget, ...] = ()
    rules: Rules = NO_RULES
    #: The rules file's targets, by URL (those also in :attr:`everywhere` left out).
    scoped: Mapping[str, WebhookTarget] = attrs.field(factory=dict)

    @property
    def targets(self) -> tuple[WebhookTarget, ...]:
        """Every distinct target (what the deliverer posts to)."""
        return self.everywhere + tuple(self.scoped.values())

    def for_tool(self, tool: str) -> tuple[WebhookTarget, ...]:
        """The targets one event of ``tool`` is queued for, each once."""
        if not self.scoped:
            return self.everywhere
        listed = self.rules.for_tool(tool).webhooks
        own = tuple(self.scoped[url] for url, _, _ in listed if url in self.scoped)
        return self.everywhere + own

    def __repr__(self) -> str:
        return f"WebhookRoutes(targets={list(self.targets)!r})"


#: No webhooks at all.
NO_ROUTES = WebhookRoutes()


def webhook_routes(everywhere: Sequence[WebhookTarget], rules: Rules = NO_RULES) -> WebhookRoutes:
    """The routes for these server targets and the rules file's webhooks, checked.

    ``ValueError`` (never quoting a secret) for a URL given twice with another
    secret or format, or a rules-file secret that is not ``whsec_`` + base64.
    """
    everywhere = tuple(everywhere)
    by_url = {target.url: target for target in everywhere}
    if len(by_url) != len(everywhere):
        raise ValueError("each webhook URL may be given once")
    scoped: dict[str, WebhookTarget] = {}
    rule_list = [rules.defaults, *rules.tools.values()]
    for rule in rule_list:
        for url, secret_text, fmt in rule.webhooks:
            where = f"the rules file's webhook {display_url(url)}"
            try:
                key = None if secret_text is None else parse_secret(secret_text)
            except ValueError as exc:  # its message never quotes the secret
                raise ValueError(f"{where}: {exc}") from None
            target = WebhookTarget(url, key, fmt)
            known = by_url.get(url) or scoped.get(url)
            if known is None:
                scoped[url] = target
            elif (known.secret, known.format) != (key, fmt):
                raise ValueError(
                    f"{where} is also given elsewhere with another secret or format "
                    "(one URL, one secret and format)"
                )
    return WebhookRoutes(everywhere=everywhere, rules=rules, scoped=scoped)
