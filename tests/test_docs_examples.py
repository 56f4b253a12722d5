"""Every Python block of README.md and docs/quickstart.md runs as written, against a local provider.

Each file's blocks run in order in one namespace (a later block uses what an
earlier one defined), as a reader pastes them into one session, with the
environment a reader exports after ``approval-guard serve``: the local
provider's URL and credential. The provider approves each request at once.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from approval_guard import _default
from approval_guard.testing import LocalProvider, approve_after
from tests.support.paths import REPO

BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
PAGES = ["README.md", "docs/quickstart.md"]


def python_blocks(page: str) -> list[str]:
    return BLOCK.findall((REPO / page).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_of_the_page_runs_as_written(
    page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks run in order without an error, and their guarded calls reach the provider."""
    blocks = python_blocks(page)
    assert blocks, f"{page} has no Python block"
    with LocalProvider(policy=approve_after(0)) as provider:
        monkeypatch.setenv("APPROVAL_GUARD_URL", provider.url)
        monkeypatch.setenv("APPROVAL_GUARD_CREDENTIAL", provider.credential)
        namespace: dict[str, object] = {"__name__": "__docs__"}
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                for number, block in enumerate(blocks, 1):
                    code = compile(block, f"{page} (Python block {number})", "exec")
                    exec(code, namespace)  # the documentation's own examples
        finally:
            guard = namespace.get("guard")
            close = getattr(guard, "close", None)
            if callable(close):
                close()
            for default in list(_default._DEFAULT_GUARDS.values()):
                default.close()
            _default._DEFAULT_GUARDS.clear()
        made = provider.requests()

    assert made, f"{page}'s blocks made no approval request"
    assert all(request.status == "approved" for request in made)
    assert "refunded" in printed.getvalue()  # the tool ran, and the block printed its result


def test_the_pages_do_not_repeat_each_others_examples() -> None:
    """README, docs/index.md and docs/quickstart.md share no Python block."""
    seen: dict[str, str] = {}
    for page in [*PAGES, "docs/index.md"]:
        for block in python_blocks(page):
            assert block not in seen, f"{page} repeats a block of {seen.get(block)}"
            seen[block] = page


def test_the_readme_stays_short() -> None:
    """The README is at most 200 lines: the rest is in the documentation site."""
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_no_page_is_named_here_that_does_not_exist() -> None:
    """Every docs page the README links to exists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert Path(REPO / link).is_file(), link
