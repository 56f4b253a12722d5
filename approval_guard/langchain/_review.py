"""``interrupt_on`` in ``HumanInTheLoopMiddleware``'s shape, read as the provider's options.

``{"issue_refund": True}`` allows approve, edit and reject, as LangChain's own
middleware does; ``False`` leaves the tool unreviewed; a dict names
``allowed_decisions`` (any of ``"approve"``, ``"edit"``, ``"reject"``), an
optional ``when`` predicate on the ``ToolCallRequest``, and any of
``requires_approval``'s options (``timeout``, ``redact``, ``messages``, ...).
The mapping to the provider: approve is an approval as sent, edit makes every
argument of the tool editable (an approval with the reviewer's arguments),
reject is a denial. A reviewer at the provider can always approve as sent or
deny, so ``"approve"`` and ``"reject"`` must be listed; ``"respond"`` (a
person answering in the tool's place) has no counterpart there and is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from approval_guard._options.shape import unknown_tool
from approval_guard._options.spec import build_spec
from approval_guard.exceptions import ConfigurationError

DECISIONS = ("approve", "edit", "reject")
#: Keys of a tool's config that are LangChain's; the rest are requires_approval's options.
_OWN = frozenset({"allowed_decisions", "when"})


@attrs.frozen
class Review:
    """How one tool's calls are reviewed: its options, whether edits are offered, when to ask.

    Attributes:
        options: The tool's ``requires_approval`` options.
        edit: Whether a reviewer may edit the call's arguments.
        when: Ask only when it returns True, given the call's arguments; None: always.
    """

    options: Mapping[str, Any]
    edit: bool
    when: Callable[[Any], Any] | None = None


def reviews(
    interrupt_on: Mapping[str, bool | Mapping[str, Any]], shared: Mapping[str, Any]
) -> dict[str, Review]:
    """Each reviewed tool's name -> its :class:`Review`; a bad entry raises ConfigurationError."""
    if not isinstance(interrupt_on, Mapping):
        raise ConfigurationError(
            "interrupt_on must map tool names to True, False or a config dict, "
            f"not {type(interrupt_on).__name__}"
        )
    if "editable" in shared:
        raise ConfigurationError(
            'editable is set by allowed_decisions here: list "edit" to make arguments editable'
        )
    if "when" in shared:
        raise ConfigurationError(
            "when is a tool's own (a predicate on its ToolCallRequest): set it in interrupt_on"
        )
    out: dict[str, Review] = {}
    for name, config in interrupt_on.items():
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise ConfigurationError(
                "interrupt_on must name tools by strings of 1 to 200 characters"
            )
        if config is False:
            continue
        if config is True:
            config = {"allowed_decisions": list(DECISIONS)}
        if not isinstance(config, Mapping):
            raise ConfigurationError(
                f"interrupt_on[{name!r}] must be True, False or a config dict, "
                f"not {type(config).__name__}"
            )
        out[name] = _review(name, config, shared)
    return out


def _review(name: str, config: Mapping[str, Any], shared: Mapping[str, Any]) -> Review:
    where = f"interrupt_on[{name!r}]"
    if "description" in config or "args_schema" in config:
        raise ConfigurationError(
            f"{where} sets description or args_schema, which the approval provider does not "
            "show: the reviewer sees the tool's name and its arguments"
        )
    if "editable" in config:
        raise ConfigurationError(
            f'{where} sets editable: list "edit" in allowed_decisions to make arguments editable'
        )
    allowed = config.get("allowed_decisions")
    if isinstance(allowed, str) or not isinstance(allowed, (list, tuple)):
        raise ConfigurationError(
            f'{where} needs allowed_decisions, a list such as ["approve", "edit", "reject"]'
        )
    unknown = [d for d in allowed if d not in DECISIONS]
    if unknown:
        raise ConfigurationError(
            f"{where} allows {unknown[0]!r}, which an approval provider cannot decide "
            f"(it decides {', '.join(DECISIONS)})"
        )
    missing = [d for d in ("approve", "reject") if d not in allowed]
    if missing:
        raise ConfigurationError(
            f"{where} leaves out {missing[0]!r}, but a reviewer at the provider can always "
            'approve as sent or deny: list both "approve" and "reject"'
        )
    when = config.get("when")
    if when is not None and not callable(when):
        raise ConfigurationError(f"{where}: when must be a callable taking a ToolCallRequest")
    options = {**shared, **{key: value for key, value in config.items() if key not in _OWN}}
    build_spec(unknown_tool(), options=options, name=name)  # names: once the call's are known
    return Review(options=options, edit="edit" in allowed, when=when)
