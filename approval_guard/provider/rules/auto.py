"""Auto-decisions of a rules file, ``[[tools.NAME.auto]]``: a scope decided at once, by the rule.

Checked when the file is read (``FILE:LINE`` for every refusal), in the scope
language of grants (:mod:`~approval_guard.provider.rules.scope`), where an
argument a ``match`` does not name is unconstrained.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from approval_guard.provider.rules.scope import ScopeError, check_match
from approval_guard.provider.rules.toml_lines import Lines, array_lines, key_after

_AUTO_KEYS = ("name", "decision", "match", "requested_by")


@attrs.frozen
class AutoRule:
    """One ``[[tools.NAME.auto]]`` entry: a scope decided at once, by the rule."""

    name: str
    #: ``"approved"`` or ``"denied"`` (the file says ``approve`` / ``deny``).
    decision: str
    #: Argument name -> checked constraint (see :mod:`~approval_guard.provider.rules.scope`).
    match: Mapping[str, Any] = attrs.field(factory=dict)
    #: Only calls on behalf of one of these; None: anyone's, or nobody's. An approve rule
    #: compares names exactly as sent; a deny rule as self-approval does (case and
    #: compatibility forms folded), so a variant of a denied name is still denied.
    requested_by: tuple[str, ...] | None = None


def parse_auto(
    value: object, path: tuple[str, ...], lines: Lines, fail: Any
) -> tuple[AutoRule, ...]:
    where = ".".join(path) + ".auto"
    line = lines.of_table(*path, "auto")
    if not isinstance(value, list) or not all(isinstance(one, dict) for one in value):
        raise fail(line, f"{where} must be [[{where}]] tables")
    starts = array_lines(lines, (*path, "auto"))
    rules: list[AutoRule] = []
    names: set[str] = set()
    for n, entry in enumerate(value):
        at = starts[n] if n < len(starts) else line
        label = f"{where}[{n + 1}]"

        def key_line(key: str, at: int = at) -> int:
            return key_after(lines, at, key)

        for key in entry:
            if key not in _AUTO_KEYS:
                raise fail(
                    key_line(key), f"unknown key {key!r} in {label} ({', '.join(_AUTO_KEYS)})"
                )
        name = entry.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 100 or not name.isprintable():
            raise fail(key_line("name"), f"{label}.name must be 1 to 100 printable characters")
        if name in names:
            raise fail(key_line("name"), f"{label}.name {name!r} is used twice in {where}")
        names.add(name)
        decision = entry.get("decision")
        if decision not in ("approve", "deny"):
            raise fail(key_line("decision"), f'{label}.decision must be "approve" or "deny"')
        if "match" not in entry:
            raise fail(at, f"{label} needs a match (use {{}} to cover every call of the tool)")
        try:
            match = check_match(entry["match"], arguments=None, allow_same=False)
        except ScopeError as exc:
            raise fail(key_line("match"), f"{label}.match: {exc}") from None
        requested_by = entry.get("requested_by")
        if requested_by is not None and (
            not isinstance(requested_by, list)
            or not requested_by
            or not all(isinstance(one, str) and one for one in requested_by)
        ):
            raise fail(
                key_line("requested_by"), f"{label}.requested_by must be a non-empty list of names"
            )
        rules.append(
            AutoRule(
                name=name,
                decision="approved" if decision == "approve" else "denied",
                match=match,
                requested_by=None if requested_by is None else tuple(requested_by),
            )
        )
    # Deny rules first: of two that cover a call, the denial wins.
    return tuple(sorted(rules, key=lambda rule: rule.decision != "denied"))
