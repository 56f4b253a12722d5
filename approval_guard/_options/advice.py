"""What a model should do next when a call did not run: one sentence per :class:`Reason`.

A :class:`~approval_guard.NotRun`'s ``message`` says truthfully why the call
did not run; its ``advice`` (appended to ``str()``) says what to do about it.
``requires_approval(messages={ag.Reason.DENIED: "..."})`` replaces a tool's advice.
"""

from __future__ import annotations

from collections.abc import Mapping

from approval_guard._call.outcome import Reason
from approval_guard.exceptions import ConfigurationError

DEFAULT_ADVICE: Mapping[Reason, str] = {
    Reason.DENIED: (
        "Do not retry the same call: tell the user it was denied, and ask how to go on."
    ),
    Reason.NOT_OBTAINED: (
        "Nobody denied it: it may be tried again later, or the user may be asked to get "
        "it approved."
    ),
    Reason.APPROVAL_EXPIRED: (
        "Nobody denied it: the call may be made again to ask for a fresh approval."
    ),
    Reason.CANCELLED: "Do not retry it unless the user asks you to.",
    Reason.ALREADY_EXECUTED: (
        "It has already started or run once: do not retry it; check what the earlier run "
        "did before doing anything else."
    ),
}

#: When a reviewer's approved edit could not be applied (reason NOT_OBTAINED).
EDIT_NOT_APPLIED = (
    "A reviewer approved it with changes that could not be applied: do not retry it "
    "unchanged; tell the user and ask what to do."
)

#: When the call itself is refused before anything is sent (the same call is refused again).
REFUSED_AS_SENT = "Do not retry the same call unchanged: it would be refused again; tell the user."

#: The longest advice sentence a tool may set.
MAX_ADVICE = 1000


def check_messages(messages: object) -> Mapping[Reason, str]:
    """``messages=`` checked at decoration: Reason -> a non-empty sentence."""
    if messages is None:
        return {}
    if not isinstance(messages, Mapping):
        raise ConfigurationError("messages must be a mapping of ag.Reason to a sentence")
    out: dict[Reason, str] = {}
    for reason, text in messages.items():
        try:
            key = Reason(reason)
        except ValueError:
            raise ConfigurationError(
                f"messages has a key {reason!r} that is not an ag.Reason"
            ) from None
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_ADVICE:
            raise ConfigurationError(
                f"messages[{key.name}] must be a sentence of 1 to {MAX_ADVICE} characters"
            )
        out[key] = text
    return out


def advice_for(
    reason: Reason, messages: Mapping[Reason, str], *, edit: bool = False, refused: bool = False
) -> str:
    """The next-step sentence for ``reason``: the tool's own, else the default.

    ``edit``: a reviewer's edit could not be applied; ``refused``: the call was
    refused before anything was sent (both ``NOT_OBTAINED``, with their own advice).
    """
    own = messages.get(reason)
    if own is not None:
        return own
    if reason is Reason.NOT_OBTAINED:
        if edit:
            return EDIT_NOT_APPLIED
        if refused:
            return REFUSED_AS_SENT
    return DEFAULT_ADVICE[reason]
