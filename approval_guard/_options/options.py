"""The options of ``requires_approval``, declared once, as the type of its ``**options``."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, TypedDict

from approval_guard._call.outcome import Reason
from approval_guard._codec.duration import DurationLike

#: The approval window asked for when a tool names none.
DEFAULT_TIMEOUT = "30m"


class ApprovalOptions(TypedDict, total=False):
    """A guarded tool's options, each optional (``on_not_run`` is typed on its own).

    - ``timeout``: the approval window to ask for (default ``"30m"``; clamped to
      fit the harness's limit).
    - ``tool``: the name the reviewer sees (default: the function's name).
    - ``exclude``: parameters not sent for approval (framework-injected context).
    - ``when``: ask only if this returns True, given the bound arguments (a
      mapping of name to the original value); False runs the tool at once.
      Raising or returning a non-bool means ask.
    - ``describe``: a sentence for the reviewer saying what this call does,
      made from its arguments as the reviewer sees them (a read-only mapping of
      name to JSON value, a redacted value as its marker); sent as the request's
      ``context`` (API 1.3), at most 1,000 characters (a longer one is cut to fit,
      ending ``" [… cut]"``). Raising or returning anything but a non-empty
      string means nothing is sent and the tool does not run. An async tool may
      have an async ``describe``. ``harness_call(reason=...)`` takes its place.
    - ``redact``: parameter names or dotted paths (``"card.number"``), or a
      callable, whose values the reviewer sees only as a keyed digest.
    - ``editable``: parameters a reviewer may change when approving; the tool
      then runs with the new values, converted to their annotations.
    - ``on_event``: called with each event of this tool's calls (``ag.RequestCreated``, ...).
    - ``messages``: ``{ag.Reason.DENIED: "..."}``, this tool's own next-step
      sentences for a model, in place of the defaults.
    """

    timeout: DurationLike
    tool: str | None
    exclude: Collection[str]
    when: Callable[[Mapping[str, Any]], Any] | None
    describe: Callable[[Mapping[str, Any]], Any] | None
    redact: Collection[str] | Callable[[dict[str, Any]], Any] | None
    editable: Collection[str]
    on_event: Callable[[Any], object] | None
    messages: Mapping[Reason, str] | None


_NAMES = frozenset(ApprovalOptions.__annotations__)


def check_names(options: Mapping[str, object]) -> None:
    """An unknown option is a ``TypeError``, as Python's own for an unexpected keyword."""
    unknown = sorted(set(options) - _NAMES)
    if unknown:
        raise TypeError(f"requires_approval() got an unexpected keyword argument {unknown[0]!r}")
