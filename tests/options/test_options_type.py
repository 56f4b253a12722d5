"""``requires_approval``'s options are one type: mypy and the decorator refuse what it lacks."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from mypy import api

import approval_guard as ag
from approval_guard._options.options import ApprovalOptions

SNIPPET = """
import approval_guard as ag

guard = ag.Guard(base_url="http://127.0.0.1:1", credential="x")

@guard.requires_approval(timout="30m")  # E: no such option
def a(x: int) -> int:
    return x

@ag.requires_approval(editable=3)  # E: not a collection of names
def b(x: int) -> int:
    return x

@ag.requires_approval(timeout="1m", tool="c", exclude=(), editable=["x"], messages=None)
def c(x: int) -> int:
    return x
"""


@pytest.mark.slow
def test_mypy_names_an_unknown_option_and_a_wrongly_typed_one(tmp_path: Path) -> None:
    """Both decorators' ``**options`` are ApprovalOptions: a typo or a bad type is a type error."""
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, err, status = api.run(
        [str(source), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache")]
    )
    flagged = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    expected = [
        number for number, line in enumerate(SNIPPET.splitlines(), start=1) if "# E:" in line
    ]
    assert expected == flagged, out + err
    assert 1 == status


@pytest.mark.parametrize(
    "decorate",
    [
        ag.requires_approval,
        ag.Guard(
            base_url="http://127.0.0.1:1", credential="x", allow_insecure_http=True
        ).requires_approval,
    ],
)
def test_an_unknown_option_raises_when_the_decorator_is_made(decorate: typing.Any) -> None:
    """A misspelt option is a TypeError at decoration, naming it, as Python's own would be."""
    with pytest.raises(TypeError, match="'timout'"):
        decorate(timout="30m")


def test_every_option_of_the_type_is_accepted() -> None:
    """Each declared option name is one the decorator takes (the type and the code agree)."""
    values: dict[str, object] = {
        "timeout": "1m",
        "tool": "t",
        "exclude": (),
        "when": lambda arguments: True,
        "describe": lambda arguments: "a sentence",
        "redact": (),
        "editable": (),
        "on_event": lambda event: None,
        "messages": {},
    }
    assert sorted(values) == sorted(ApprovalOptions.__annotations__)

    @ag.requires_approval(**values)  # type: ignore[call-overload]
    def tool() -> int:
        return 1

    assert callable(tool)
