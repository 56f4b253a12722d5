"""The modals a Slack button opens: Deny…, Deny all…, Edit and approve…, Approve and allow for….

Each carries its request (or listed ids) and channel in ``private_metadata``;
what the reviewer types comes back to ``interactions.py`` and is checked there.
"""

from __future__ import annotations

import json
from typing import Any

from approval_guard._codec.exact_json import dump_json
from approval_guard.provider.channels.slack.blocks import (
    DENY,
    DENY_ALL,
    EDIT,
    GRANT,
    MAX_EDIT_INPUTS,
    MAX_INPUT,
    code,
    plain,
    section,
    text,
)
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.rules.grant_words import (
    default_duration,
    grant_durations,
    same_scope_words,
)
from approval_guard.provider.store.models import StoredRequest


def _metadata(request: StoredRequest, channel: str | None) -> str:
    return json.dumps({"request": request.id, "channel": channel}, separators=(",", ":"))


def deny_modal(request: StoredRequest, channel: str | None) -> dict[str, Any]:
    """The "Deny…" modal: one required input for the reason (the agent receives it)."""
    return _deny_view(
        DENY,
        _metadata(request, channel),
        "Deny the request",
        f"Deny {code(request.tool, 200)} (request {code(request.id, 80)})?",
    )


def deny_all_modal(ids: list[str], channel: str | None) -> dict[str, Any]:
    """The "Deny all N…" modal: one reason, for exactly these ids (each denied as if alone)."""
    listed = ", ".join(code(one, 80) for one in ids)
    metadata = json.dumps({"requests": ",".join(ids), "channel": channel}, separators=(",", ":"))
    return _deny_view(
        DENY_ALL, metadata, f"Deny all {len(ids)}", f"Deny these {len(ids)} requests? {listed}"
    )


def _deny_view(callback: str, metadata: str, title: str, question: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback,
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            section(question),
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Why not? The agent receives it."},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "reason",
                    "multiline": True,
                    "max_length": MAX_INPUT,
                },
            },
        ],
    }


def edit_modal(request: StoredRequest, channel: str | None) -> dict[str, Any]:
    """The "Edit and approve…" modal: one input per editable argument, its JSON text filled in.

    Block ``arg<i>`` is the ``i``-th of the request's (sorted) editable names;
    what is typed is parsed as the page and the CLI parse it (exact JSON).
    """
    blocks: list[dict[str, Any]] = [
        section(f"Approve {code(request.tool, 200)} with these values (JSON: text in quotes).")
    ]
    for index, name in enumerate(request.editable[:MAX_EDIT_INPUTS]):
        current = dump_json(request.arguments[name])
        element: dict[str, Any] = {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": len(current) > 60,
            "max_length": MAX_INPUT,
        }
        if len(current) <= MAX_INPUT:
            element["initial_value"] = current
        blocks.append(
            {
                "type": "input",
                "block_id": f"arg{index}",
                # Optional: an input left empty keeps the value (one too long to fill in, too).
                "optional": True,
                "label": {"type": "plain_text", "text": plain(name, 200)},
                "element": element,
            }
        )
    blocks.append(
        {
            "type": "input",
            "block_id": "note",
            "optional": True,
            "label": {"type": "plain_text", "text": "Note (optional)"},
            "element": {"type": "plain_text_input", "action_id": "note", "max_length": MAX_INPUT},
        }
    )
    return {
        "type": "modal",
        "callback_id": EDIT,
        "private_metadata": _metadata(request, channel),
        "title": {"type": "plain_text", "text": "Edit and approve"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def grant_modal(request: StoredRequest, channel: str | None, rule: ToolRule) -> dict[str, Any]:
    """The "Approve and allow for…" modal: approve, and give a standing grant of the same calls.

    Kept simple and safe: every argument ``"same"`` and only calls made for
    the same person (the page offers wider scopes). Block ``for`` chooses the
    duration within the tool's ``max_grant``; ``uses`` (optional) how many
    calls it may approve; ``note`` an optional note.
    """
    lines = "\n".join(f"\u2022 {text(line)}" for line in same_scope_words(request))
    options = [
        {"text": {"type": "plain_text", "text": one}, "value": one}
        for one in grant_durations(rule.max_grant)
    ]
    initial = next(o for o in options if o["value"] == default_duration(rule.max_grant))
    return {
        "type": "modal",
        "callback_id": GRANT,
        "private_metadata": _metadata(request, channel),
        "title": {"type": "plain_text", "text": "Approve and allow"},
        "submit": {"type": "plain_text", "text": "Approve and allow"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            section(
                f"Approve {code(request.tool, 200)} (request {code(request.id, 80)}), and "
                "approve at once, for a while, the calls from the same agent where:\n" + lines
            ),
            {
                "type": "input",
                "block_id": "for",
                "label": {"type": "plain_text", "text": "Allow for"},
                "element": {
                    "type": "static_select",
                    "action_id": "for",
                    "options": options,
                    "initial_option": initial,
                },
            },
            {
                "type": "input",
                "block_id": "uses",
                "optional": True,
                "label": {"type": "plain_text", "text": "At most this many calls (optional)"},
                "element": {"type": "plain_text_input", "action_id": "uses", "max_length": 7},
            },
            {
                "type": "input",
                "block_id": "note",
                "optional": True,
                "label": {"type": "plain_text", "text": "Note (optional)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "note",
                    "max_length": MAX_INPUT,
                },
            },
        ],
    }
