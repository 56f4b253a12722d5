"""A Slack message's blocks as an HTML page, laid out as Slack's Block Kit preview shows them.

For the docs' picture (``docs/slack-message.png``) and for looking at a
message without a workspace. Every block becomes one ``<div data-block=N
data-block-type=...>``; ``mrkdwn`` is rendered as Slack does (``*bold*``,
``_italic_``, code spans, ``>`` quotes, ``<url|text>`` links, ``<!date^...|fallback>``
as its fallback), and all text is HTML-escaped first, so nothing in a block
can become markup. Make the picture with::

    python -m approval_guard.provider.channels.slack.preview docs/slack-message.png

(Playwright and Chromium, the ``browser`` extra; without a path it prints the HTML.)
"""

from __future__ import annotations

import html
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

from approval_guard.provider.channels.slack.blocks import message
from approval_guard.provider.rules.config import ToolRule
from approval_guard.provider.store.models import Approval, StoredRequest

_STYLE = """
body { font: 15px/1.46668 -apple-system, "Segoe UI", Lato, Helvetica, Arial, sans-serif;
  color: #1d1c1d; background: #fff; margin: 0; padding: 20px; }
.msg { display: flex; gap: 8px; max-width: 640px; }
.avatar { width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff;
  font-weight: 900; display: flex; align-items: center; justify-content: center; flex: none; }
.who { font-weight: 900; } .who small { font-weight: 400; color: #616061; font-size: 12px; }
.app { background: #dddddd; color: #616061; font-size: 10px; padding: 1px 3px; border-radius: 2px;
  margin: 0 4px; font-weight: 700; }
.block { margin: 4px 0; white-space: pre-wrap; word-wrap: break-word; }
.context { color: #616061; font-size: 12px; }
code { font: 12px Monaco, Menlo, Consolas, monospace; color: #e01e5a; background: #f8f8f8;
  border: 1px solid #e8e8e8; border-radius: 3px; padding: 1px 3px; }
blockquote { border-left: 4px solid #dddddd; margin: 2px 0; padding-left: 8px; }
a { color: #1264a3; text-decoration: none; }
.actions { display: flex; gap: 8px; margin-top: 8px; }
.button { border: 1px solid #bbb; border-radius: 4px; padding: 3px 12px; font-weight: 700;
  font-size: 13px; background: #fff; }
.button.primary { background: #007a5a; color: #fff; border-color: #007a5a; }
.button.danger { color: #e01e5a; border-color: #e01e5a; }
"""

_CODE = re.compile(r"`([^`]*)`")
#: Slack's own markup: ``<url|text>``, ``<!date^...|fallback>`` (text from a person is
#: escaped, ``&lt;``, so it never matches).
_MARKUP = re.compile(r"<([^<>\n]*)>")
_TOKEN = re.compile("\x00([0-9]+)\x00")


def _markup(inner: str) -> str:
    if inner.startswith("!date^"):
        return html.escape(inner.split("|", 1)[-1])
    if inner.startswith(("http://", "https://")):
        url, _, label = inner.partition("|")
        return f'<a href="{html.escape(url)}">{html.escape(label or url)}</a>'
    return html.escape(f"<{inner}>")


def _line_html(line: str) -> str:
    tokens: list[str] = []

    def keep(found: re.Match[str]) -> str:
        tokens.append(_markup(found.group(1)))
        return f"\x00{len(tokens) - 1}\x00"

    # Slack's entities (&amp; &lt; &gt;) show as the characters they stand for, as text.
    out = html.escape(html.unescape(_MARKUP.sub(keep, line)), quote=False)
    pieces = _CODE.split(out)
    for n in range(0, len(pieces), 2):
        bold = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<b>\1</b>", pieces[n])
        pieces[n] = re.sub(r"(?<![\w_])_([^_\n]+)_(?![\w_])", r"<i>\1</i>", bold)
    for n in range(1, len(pieces), 2):
        pieces[n] = f"<code>{pieces[n]}</code>"
    return _TOKEN.sub(lambda found: tokens[int(found.group(1))], "".join(pieces))


def mrkdwn_html(text: str) -> str:
    """One ``mrkdwn`` text as HTML; nothing in it but Slack's own markup becomes markup."""
    return "\n".join(
        f"<blockquote>{_line_html(line[1:])}</blockquote>"
        if line.startswith(">")
        else _line_html(line)
        for line in text.split("\n")
    )


def _block_html(n: int, block: dict[str, Any]) -> str:
    kind = str(block.get("type", ""))
    shown = html.escape(kind)
    head = f'<div class="block {shown}" data-block="{n}" data-block-type="{shown}">'
    if kind == "section":
        return head + mrkdwn_html(str(block["text"]["text"])) + "</div>"
    if kind == "context":
        parts = [mrkdwn_html(str(element.get("text", ""))) for element in block["elements"]]
        return head + " ".join(parts) + "</div>"
    if kind == "actions":
        buttons = []
        for element in block["elements"]:
            style = html.escape(str(element.get("style", "")))
            label = html.escape(str(element["text"]["text"]))
            action = html.escape(str(element.get("action_id", "")))
            buttons.append(f'<span class="button {style}" data-action="{action}">{label}</span>')
        return head + "".join(buttons) + "</div>"
    return head + html.escape(kind) + "</div>"


def preview_html(body: dict[str, Any], *, app: str = "Approval Guard", at: str = "12:02") -> str:
    """A whole HTML page showing the message ``{"text", "blocks"}`` as Slack would."""
    blocks = "\n".join(_block_html(n, block) for n, block in enumerate(body["blocks"]))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Slack message</title>"
        f"<style>{_STYLE}</style></head><body><div class='msg'>"
        "<div class='avatar'>AG</div><div>"
        f"<div class='who'>{html.escape(app)}<span class='app'>APP</span><small>{at}</small></div>"
        f"{blocks}</div></div></body></html>"
    )


def sample_message(now: datetime | None = None) -> dict[str, Any]:
    """The docs' example: a refund needing two approvals from payments, one given."""
    now = now or datetime(2026, 9, 16, 12, 2, tzinfo=timezone.utc)
    request = StoredRequest(
        id="7ab8c8ec-7b2d-4fd6-9b52-752f9515eb71",
        tool="issue_refund",
        arguments={
            "payment_id": "payment_123",
            "amount": 4900,
            "currency": "GBP",
            "card": {"$redacted": "1a2b3c4d5e6f"},
        },
        timeout="30m",
        status="pending",
        created_at=now - timedelta(minutes=2),
        deadline_at=now + timedelta(minutes=28),
        requested_by="frank",
        approvals_required=2,
        approvals=(Approval(by="alice", at=now - timedelta(minutes=1)),),
    )
    rule = ToolRule(approvers=("payments",), approvals_required=2)
    return message(request, rule=rule, now=now, public_url="https://approvals.example")


def render_png(page_html: str, path: str, *, chromium: str = "/usr/bin/chromium") -> None:
    """Screenshot the page in headless Chromium (Playwright) to ``path``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 700, "height": 400})
            page.set_content(page_html)
            page.locator(".msg").screenshot(path=path)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m approval_guard.provider.channels.slack.preview [PNG]``: the docs' picture."""
    args = sys.argv[1:] if argv is None else argv
    page_html = preview_html(sample_message())
    if not args:
        print(page_html)
        return 0
    render_png(page_html, args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
