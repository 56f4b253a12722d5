"""Per-tool review rules from a TOML file: who may decide, how many must approve, for how long.

::

    [defaults]                      # optional: applies to every tool, a tool's table overrides
    approvals_required = 1

    [tools.issue_refund]
    approvers = ["payments"]        # roles that may decide; default: every reviewer
    approvals_required = 2          # distinct people; default 1 (1..10)
    self_approval = false           # the requested_by person may not approve (default true)
    max_valid_for = "15m"           # an approval may not stay valid longer
    webhooks = [{url = "https://hooks.example/x", secret = "whsec_...", format = "slack"}]
    slack_channel = "C0123ABC"      # post its requests to this Slack channel (serve --slack-...)
    email_to = ["role:payments", "carol@example.com"]  # mailed one-click links (docs/email.md)
    grants = true                   # reviewers may give standing grants (default true)
    max_grant = "1h"                # the longest a standing grant may last (default 1h)

    [[tools.issue_refund.auto]]     # decided at once, by the rule (docs/asking-less.md)
    name = "small GBP refunds"
    decision = "approve"            # or "deny"; deny rules win over approve rules
    match = { amount = { max = 1000 }, currency = { in = ["GBP"] } }
    requested_by = ["alice@example.com"]   # optional: only calls on behalf of these

A tool without a table gets ``[defaults]`` (or, without that, today's
behaviour: any reviewer, one approval). Every refusal is a :class:`RulesError`
naming the file and the line; a secret never appears in one, nor in a repr.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from approval_guard._codec.duration import parse_duration_string
from approval_guard.exceptions import ProviderError
from approval_guard.provider.channels.webhooks.signing import check_url, parse_secret
from approval_guard.provider.rules.auto import AutoRule, parse_auto
from approval_guard.provider.rules.toml_lines import Lines

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

#: The most distinct approvals a rule may require.
MAX_APPROVALS = 10
WEBHOOK_FORMATS = ("standard", "slack")
#: The longest an approval may be made to stay valid (the API's own limit on a request).
MAX_VALID_FOR = 24 * 3600
_KEYS = (
    "approvers",
    "approvals_required",
    "self_approval",
    "max_valid_for",
    "webhooks",
    "slack_channel",
    "email_to",
    "grants",
    "max_grant",
    "auto",
)
#: The default (and the ceiling of) how long a standing grant may last.
DEFAULT_MAX_GRANT = 3600
#: The longest ``max_grant`` a rules file may set.
MAX_GRANT = 7 * 24 * 3600
#: A Slack channel: its id (``C0123ABC``), or ``#name``.
SLACK_CHANNEL = re.compile(r"[CGD][A-Z0-9]{2,30}|#[a-z0-9][a-z0-9._-]{0,79}")
_WEBHOOK_KEYS = ("url", "secret", "format")
_TOML_LINE = re.compile(r"at line (\d+)")


class RulesError(ProviderError, ValueError):
    """A rules file that cannot be used; the message names the file and the line."""


def _hide(_: object) -> str:
    return "(...)"


#: A webhook as the rule keeps it: ``(url, secret or None, format)``.
Webhook = tuple[str, str | None, str]


@attrs.frozen
class ToolRule:
    """What one tool's decisions need. ``approvers`` None means every reviewer may decide."""

    approvers: tuple[str, ...] | None = None
    approvals_required: int = 1
    self_approval: bool = True
    #: Seconds an approval may stay valid at most, or None for no limit.
    max_valid_for: int | None = None
    #: ``(url, secret | None, format)`` each; hidden from the repr (the secret).
    webhooks: tuple[Webhook, ...] = attrs.field(default=(), repr=_hide)
    #: The Slack channel its requests are posted to (else the server's ``--slack-channel``).
    slack_channel: str | None = None
    #: Who is mailed this tool's new requests: addresses and ``role:NAME`` entries.
    email_to: tuple[str, ...] = ()
    #: Whether reviewers may give standing grants on this tool.
    grants: bool = True
    #: Seconds a standing grant may last at most.
    max_grant: int = DEFAULT_MAX_GRANT
    #: Auto-decisions, deny rules first (each decides a covered create at once).
    auto: tuple[AutoRule, ...] = ()

    def may_decide(self, roles: tuple[str, ...]) -> bool:
        """True when a reviewer with these roles may decide this tool's requests."""
        return self.approvers is None or bool(set(self.approvers) & set(roles))


#: The rule of a tool nobody wrote one for: any reviewer, one approval.
DEFAULT_RULE = ToolRule()


@attrs.frozen
class Rules:
    """Every tool's rule; :meth:`for_tool` answers for a tool without one too."""

    tools: Mapping[str, ToolRule] = attrs.field(factory=dict)
    defaults: ToolRule = DEFAULT_RULE
    source: str | None = None

    def for_tool(self, tool: str) -> ToolRule:
        return self.tools.get(tool, self.defaults)


#: No rules file: every tool has today's behaviour.
NO_RULES = Rules()


def load_rules(path: str | Path) -> Rules:
    """Read a rules file; :class:`RulesError` (file and line) for anything wrong in it."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"{name}: cannot read the rules file: {exc}") from None
    return parse_rules(text, name)


def parse_rules(text: str, filename: str = "rules.toml") -> Rules:
    """Parse a rules file's text; ``filename`` is what errors call it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        # tomllib says "at end of document" for what runs off the end: the last line.
        line = found.group(1) if found else str(max(1, len(text.splitlines())))
        raise RulesError(f"{filename}:{line}: not valid TOML: {exc}") from None
    lines = Lines(text)

    def fail(line: int, message: str) -> RulesError:
        return RulesError(f"{filename}:{line}: {message}")

    for key in data:
        if key not in ("tools", "defaults"):
            raise fail(lines.of_key((), key), f"unknown key or table {key!r} (tools, defaults)")
    defaults = DEFAULT_RULE
    if "defaults" in data:
        if not isinstance(data["defaults"], dict):
            raise fail(lines.of_key((), "defaults"), "'defaults' must be a table")
        defaults = _rule(data["defaults"], ("defaults",), DEFAULT_RULE, lines, fail)
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise fail(lines.of_key((), "tools"), "'tools' must be a table of [tools.NAME] tables")
    out: dict[str, ToolRule] = {}
    for tool, table in tools.items():
        if not isinstance(table, dict):
            raise fail(lines.of_key(("tools",), tool), f"tools.{tool} must be a table")
        out[tool] = _rule(table, ("tools", tool), defaults, lines, fail)
    _check_one_setting_per_url(data, defaults, out, lines, fail)
    return Rules(tools=out, defaults=defaults, source=filename)


def _check_one_setting_per_url(
    data: dict[str, Any],
    defaults: ToolRule,
    tools: Mapping[str, ToolRule],
    lines: Lines,
    fail: Any,
) -> None:
    """A webhook URL listed in several tables must have one secret and one format.

    The outbox names a target by its URL, so one URL is one target.
    """
    seen: dict[str, tuple[str | None, str]] = {}
    tables: list[tuple[tuple[str, ...], ToolRule, dict[str, Any]]] = [
        (("defaults",), defaults, data.get("defaults") or {})
    ]
    tables += [(("tools", name), rule, data["tools"][name]) for name, rule in tools.items()]
    for path, rule, table in tables:
        if "webhooks" not in table:
            continue
        urls = [url for url, _, _ in rule.webhooks]
        where = ".".join(path)
        if len(set(urls)) != len(urls):
            raise fail(lines.of_key(path, "webhooks"), f"{where}.webhooks lists a URL twice")
        for url, secret, fmt in rule.webhooks:
            if seen.setdefault(url, (secret, fmt)) != (secret, fmt):
                raise fail(
                    lines.of_key(path, "webhooks"),
                    f"{where}.webhooks: a URL given in another table has another secret or "
                    "format there (one URL, one secret and format)",
                )


def _rule(
    table: dict[str, Any],
    path: tuple[str, ...],
    base: ToolRule,
    lines: Lines,
    fail: Any,
) -> ToolRule:
    where = ".".join(path)
    for key in table:
        if key not in _KEYS:
            raise fail(
                lines.of_key(path, key), f"unknown key {key!r} in [{where}] ({', '.join(_KEYS)})"
            )

    def at(key: str) -> int:
        return int(lines.of_key(path, key))

    changes: dict[str, Any] = {}
    if "approvers" in table:
        value = table["approvers"]
        if (
            not isinstance(value, list)
            or not value
            or not all(
                isinstance(role, str)
                and 1 <= len(role) <= 64
                and role.isprintable()
                and not any(ch.isspace() for ch in role)
                for role in value
            )
        ):
            raise fail(
                at("approvers"),
                f"{where}.approvers must be a non-empty list of role names "
                "(1 to 64 printable characters without spaces, as `reviewers add --role`)",
            )
        changes["approvers"] = tuple(value)
    if "approvals_required" in table:
        value = table["approvals_required"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(at("approvals_required"), f"{where}.approvals_required must be an integer")
        if not 1 <= value <= MAX_APPROVALS:
            raise fail(
                at("approvals_required"),
                f"{where}.approvals_required must be 1 to {MAX_APPROVALS}, not {value}",
            )
        changes["approvals_required"] = value
    if "self_approval" in table:
        value = table["self_approval"]
        if not isinstance(value, bool):
            raise fail(at("self_approval"), f"{where}.self_approval must be true or false")
        changes["self_approval"] = value
    if "max_valid_for" in table:
        value = table["max_valid_for"]
        try:
            seconds = parse_duration_string(value) if isinstance(value, str) else 0
        except ValueError:
            seconds = 0
        if not 0 < seconds <= MAX_VALID_FOR:
            raise fail(
                at("max_valid_for"),
                f'{where}.max_valid_for must be a duration from 1s to 24h, such as "15m"',
            )
        changes["max_valid_for"] = seconds
    if "webhooks" in table:
        changes["webhooks"] = _webhooks(table["webhooks"], where, at("webhooks"), fail)
    if "slack_channel" in table:
        value = table["slack_channel"]
        if not isinstance(value, str) or not SLACK_CHANNEL.fullmatch(value):
            raise fail(
                at("slack_channel"),
                f'{where}.slack_channel must be a Slack channel id such as "C0123ABC" (or "#name")',
            )
        changes["slack_channel"] = value
    if "email_to" in table:
        changes["email_to"] = _email_to(table["email_to"], where, at("email_to"), fail)
    if "grants" in table:
        value = table["grants"]
        if not isinstance(value, bool):
            raise fail(at("grants"), f"{where}.grants must be true or false")
        changes["grants"] = value
    if "max_grant" in table:
        value = table["max_grant"]
        try:
            seconds = parse_duration_string(value) if isinstance(value, str) else 0
        except ValueError:
            seconds = 0
        if not 0 < seconds <= MAX_GRANT:
            raise fail(
                at("max_grant"), f'{where}.max_grant must be a duration from 1s to 7d, such as "1h"'
            )
        changes["max_grant"] = seconds
    if "auto" in table:
        if path[0] != "tools":
            raise fail(at("auto"), "auto rules belong to a tool: [[tools.NAME.auto]]")
        changes["auto"] = parse_auto(table["auto"], path, lines, fail)
    return attrs.evolve(base, **changes)


def _email_to(value: object, where: str, line: int, fail: Any) -> tuple[str, ...]:
    # Imported here: the email package's routes import this module.
    from approval_guard.provider.channels.email.addresses import AddressError, check_recipient

    if not isinstance(value, list) or not value:
        raise fail(line, f"{where}.email_to must be a non-empty list of addresses or role:NAME")
    try:
        return tuple(dict.fromkeys(check_recipient(one) for one in value))
    except AddressError as exc:
        raise fail(line, f"{where}.email_to: {exc}") from None


def _webhooks(value: object, where: str, line: int, fail: Any) -> tuple[Webhook, ...]:
    # Values are never quoted here: a URL may carry a token, and the secret is one.
    if not isinstance(value, list):
        raise fail(line, f"{where}.webhooks must be a list of {{url, secret, format}} tables")
    out: list[Webhook] = []
    for n, hook in enumerate(value, 1):
        label = f"{where}.webhooks[{n}]"
        if not isinstance(hook, dict):
            raise fail(line, f"{label} must be a table {{url = ..., secret = ..., format = ...}}")
        for key in hook:
            if key not in _WEBHOOK_KEYS:
                raise fail(line, f"unknown key {key!r} in {label} ({', '.join(_WEBHOOK_KEYS)})")
        url = hook.get("url")
        if not isinstance(url, str) or not re.match(r"https?://[^\s/]+", url):
            raise fail(line, f"{label}.url must be an http:// or https:// URL")
        try:
            check_url(url)
        except ValueError:
            raise fail(line, f"{label}.url must be an http:// or https:// URL") from None
        secret = hook.get("secret")
        if secret is not None and (not isinstance(secret, str) or not secret):
            raise fail(line, f"{label}.secret must be a non-empty string")
        if secret is not None:
            try:
                parse_secret(secret)
            except ValueError as exc:  # its message never quotes the secret
                raise fail(line, f"{label}.secret: {exc}") from None
        fmt = hook.get("format", "standard")
        if fmt not in WEBHOOK_FORMATS:
            raise fail(line, f"{label}.format must be one of {', '.join(WEBHOOK_FORMATS)}")
        out.append((url, secret, str(fmt)))
    return tuple(out)
