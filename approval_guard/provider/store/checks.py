"""The store's checks of what it is given: tokens, idempotency bodies, editable names, edits.

Pure functions, shared by every store backend and by the HTTP layer, so a
value is refused the same way whichever database keeps it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from approval_guard._codec.display import redaction_digest
from approval_guard._codec.duration import format_duration
from approval_guard._codec.exact_json import (
    MAX_JSON_DEPTH,
    InvalidJSON,
    canonical_json,
    check_json_value,
    load_json,
    unreadable_number,
)
from approval_guard._codec.marker import holds_marker_key as contains_redacted
from approval_guard._codec.wire import APPROVED
from approval_guard.provider.store.models import InvalidEdit, StoredRequest

#: A given token's length bounds: long enough to be a secret, short enough for a header.
GIVEN_TOKEN_LENGTH = (24, 512)


def check_given_token(token: object, kind: str) -> None:
    """A known token to store: 24 to 512 printable ASCII characters without spaces.

    The message never shows the token: it is a secret.
    """
    low, high = GIVEN_TOKEN_LENGTH
    if (
        not isinstance(token, str)
        or not low <= len(token) <= high
        or not all(32 < ord(ch) < 127 for ch in token)
    ):
        raise ValueError(
            f"a given {kind} token must be {low} to {high} printable ASCII characters "
            "without spaces"
        )


def body_hash(
    tool: str,
    arguments: dict[str, Any],
    timeout_seconds: int,
    editable: Sequence[str] = (),
    requested_by: str | None = None,
    *,
    batch: str | None = None,
    context: str | None = None,
    redacted: Sequence[str] = (),
) -> str:
    """The hash an idempotency key is bound to.

    The timeout is hashed in canonical form, so ``"90s"`` and ``"1m30s"`` count
    as the same body: they mean the same request. So is ``editable``, a set of
    names: sorted, and left out when empty, so a body without it hashes as it
    always did (and ``"editable": []`` is the same body as none).
    """
    body: dict[str, Any] = {
        "tool": tool,
        "arguments": arguments,
        "timeout": format_duration(timeout_seconds),
    }
    if editable:
        body["editable"] = sorted(editable)
    if requested_by is not None:
        # API 1.1, and only when given: a body without it hashes as it always did.
        body["requested_by"] = requested_by
    # API 1.3, likewise only when given.
    if batch is not None:
        body["batch"] = batch
    if context is not None:
        body["context"] = context
    if redacted:
        body["redacted"] = sorted(redacted)  # API 1.3, likewise only when given
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- edits (API 1.1)
#
# A reviewer may change the top-level arguments a request lists as editable,
# and nothing else. Values are compared as canonical JSON text, never with
# Python's ==, which holds True == 1 == 1.0 and would let a type change pass as
# "unchanged" (or hide that a non-editable value was changed).

#: The most names one request may list as editable.
MAX_EDITABLE = 100


def _same(left: object, right: object) -> bool:
    return canonical_json(left) == canonical_json(right)


def _quoted(name: str) -> str:
    return json.dumps(name)[:80]


def check_editable(arguments: dict[str, Any], editable: object) -> tuple[str, ...]:
    """The ``editable`` names of a create body, sorted; raises :class:`InvalidEdit`.

    Each must be a string naming a top-level key of ``arguments`` whose value
    holds nothing redacted, listed once, at most :data:`MAX_EDITABLE` of them.
    ``None`` means none.
    """
    if editable is None:
        return ()
    if not isinstance(editable, (list, tuple)):
        raise InvalidEdit("'editable' must be a list of argument names")
    if len(editable) > MAX_EDITABLE:
        raise InvalidEdit(f"'editable' may list at most {MAX_EDITABLE} names")
    seen: set[str] = set()
    for name in editable:
        if not isinstance(name, str):
            raise InvalidEdit("'editable' must be a list of argument names (strings)")
        check_json_value(name)
        if name in seen:
            raise InvalidEdit(f"'editable' lists {_quoted(name)} twice")
        seen.add(name)
        if name not in arguments:
            raise InvalidEdit(f"'editable' lists {_quoted(name)}, which is not an argument")
        if contains_redacted(arguments[name]):
            raise InvalidEdit(
                f"'editable' lists {_quoted(name)}, whose value is redacted: "
                "a reviewer cannot edit what they cannot see"
            )
    return tuple(sorted(seen))


#: The most places a create may list as redacted (API 1.3).
MAX_REDACTED = 1000


def check_redacted(arguments: dict[str, Any], redacted: object) -> tuple[str, ...]:
    """API 1.3's ``redacted`` of a create body, sorted; raises :class:`InvalidJSON`.

    Each must be a JSON Pointer (RFC 6901) into ``arguments`` at a redaction
    marker (``{"$redacted": "<12 hex>"}``), listed once, at most
    :data:`MAX_REDACTED` of them. ``None`` means none: then no marker in the
    arguments is shown to a reviewer as a redaction.
    """
    if redacted is None:
        return ()
    if not isinstance(redacted, (list, tuple)):
        raise InvalidJSON("'redacted' must be a list of JSON Pointers into the arguments")
    if len(redacted) > MAX_REDACTED:
        raise InvalidJSON(f"'redacted' may list at most {MAX_REDACTED} places")
    seen: set[str] = set()
    for path in redacted:
        if not isinstance(path, str):
            raise InvalidJSON("'redacted' must be a list of JSON Pointers (strings)")
        check_json_value(path)
        if path in seen:
            raise InvalidJSON(f"'redacted' lists {_quoted(path)} twice")
        seen.add(path)
        if redaction_digest(_at_pointer(arguments, path)) is None:
            raise InvalidJSON(
                f"'redacted' lists {_quoted(path)}, which is not a redaction marker "
                '({"$redacted": "<12 hex>"}) in the arguments'
            )
    return tuple(sorted(seen))


def _at_pointer(arguments: dict[str, Any], path: str) -> object:
    """The value at a JSON Pointer below the arguments (never the whole object), or None."""
    if not path.startswith("/"):
        return None
    value: object = arguments
    for part in path[1:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if key not in value:
                return None
            value = value[key]
        elif isinstance(value, list):
            if not key.isdigit() or (key != "0" and key.startswith("0")) or not key.isascii():
                return None
            index = int(key)
            if index >= len(value):
                return None
            value = value[index]
        else:
            return None
    return value


def changed_names(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The top-level names whose values differ (added and removed ones included), sorted."""
    names = set(before) | set(after)
    return sorted(
        name
        for name in names
        if name not in before or name not in after or not _same(before[name], after[name])
    )


def check_edit(request: StoredRequest, status: str, arguments: object) -> dict[str, Any] | None:
    """A decision's ``arguments`` as kept, None for no edit; raises :class:`InvalidEdit`.

    Refused: arguments on a denial, on a request without editable names, that
    are not an object, that add, remove or change a name not listed as
    editable, that put something redacted into an edited value, or a number
    no reader holds (:func:`~approval_guard._codec.exact_json.unreadable_number`). Arguments
    equal to the request's own are no edit (None).
    """
    if arguments is None:
        return None
    if status != APPROVED:
        raise InvalidEdit("a denial cannot carry 'arguments': only an approval can edit")
    if not isinstance(arguments, dict):
        raise InvalidEdit("'arguments' must be the whole arguments object, edits applied")
    if not request.editable:
        raise InvalidEdit("this request lists no editable arguments, so none may be changed")
    check_json_value(arguments)
    changed = changed_names(request.arguments, arguments)
    for name in changed:
        if name not in request.arguments:
            raise InvalidEdit(f"'arguments' adds {_quoted(name)}, which the request does not have")
        if name not in arguments:
            raise InvalidEdit(f"'arguments' leaves out {_quoted(name)}; send the whole object")
        if name not in request.editable:
            raise InvalidEdit(f"{_quoted(name)} is not editable on this request")
        if contains_redacted(arguments[name]):
            raise InvalidEdit(f"the new value of {_quoted(name)} holds a redaction marker")
        number = unreadable_number(arguments[name])
        if number is not None:
            raise InvalidEdit(
                f"the new value of {_quoted(name)} holds {number}, a number no JSON reader "
                "holds as written (past a double's range, or too long to read), so the tool "
                "could not get it"
            )
    return arguments if changed else None


def with_edits(request: StoredRequest, edits: Mapping[str, str]) -> dict[str, Any]:
    """The request's whole arguments with each ``edits`` name set to its parsed JSON text.

    For the review page's form and a terminal's ``--set NAME=JSON``: each text
    is parsed exactly (:func:`load_json`; ``9007199254740993`` stays that
    integer). Raises :class:`InvalidEdit` for a name that is not editable or a
    text that is not JSON; a store's ``decide`` checks the result again.
    """
    out = dict(request.arguments)
    for name, text in edits.items():
        if name not in request.editable:
            raise InvalidEdit(f"{_quoted(name)} is not editable on this request")
        if not isinstance(text, str):
            raise InvalidEdit(f"the new value of {_quoted(name)} must be given as JSON text")
        try:
            # The arguments object is level 1, so a value may nest one level less.
            out[name] = load_json(text, max_depth=MAX_JSON_DEPTH - 1)
        except InvalidJSON as exc:
            raise InvalidEdit(
                f"the new value of {_quoted(name)} is not JSON ({exc}); "
                'write text in double quotes, e.g. "GBP"'
            ) from None
    return out
