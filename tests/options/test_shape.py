"""One builder of a tool's spec, whatever its shape: a signature, a list of names, a JSON schema."""

from __future__ import annotations

from typing import Any

import pytest

import approval_guard as ag
from approval_guard._options import options as options_module
from approval_guard._options.options import ApprovalOptions
from approval_guard._options.shape import from_names, from_schema, from_signature, unknown_tool
from approval_guard._options.spec import ToolSpec, build_spec
from approval_guard._options.tool_table import tool_options
from approval_guard.exceptions import ConfigurationError

SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}}


def refund(amount: int) -> int:
    return amount


async def forward(**arguments: Any) -> Any:
    return arguments


def every_shape(options: dict[str, Any]) -> list[ToolSpec]:
    """The spec of one tool as each path builds it: decorator, framework names, MCP schema."""
    guard = ag.Guard(base_url="http://127.0.0.1:9", credential="c")
    decorated: Any = guard.requires_approval(**options)(refund)
    return [
        decorated.__approval_guard__,
        build_spec(from_signature(refund), options=options),
        build_spec(from_names(forward, "refund", ["amount"]), options=options, name="refund"),
        build_spec(from_schema(forward, "refund", SCHEMA), options=options, name="refund"),
        build_spec(unknown_tool(), options=options, name="refund"),
    ]


def test_a_new_option_added_to_approval_options_reaches_every_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A throwaway option is accepted and kept by every shape's spec, and by the tool tables."""
    monkeypatch.setitem(ApprovalOptions.__annotations__, "flavour", str)
    monkeypatch.setattr(options_module, "_NAMES", frozenset(ApprovalOptions.__annotations__))

    specs = every_shape({"timeout": "1m", "flavour": "vanilla"})

    assert ["vanilla"] * 5 == [spec.options["flavour"] for spec in specs]
    assert {"refund": {"flavour": "vanilla"}} == tool_options(
        {"refund": {"flavour": "vanilla"}}, {}
    )


def test_an_option_approval_options_lacks_is_refused_by_every_path() -> None:
    """Without it in ApprovalOptions, the same option is a TypeError on every path."""
    for build in (
        lambda: ag.Guard(base_url="http://127.0.0.1:9", credential="c").requires_approval(
            flavour="vanilla"  # type: ignore[call-overload]
        ),
        lambda: build_spec(from_names(forward, "refund", ["amount"]), options={"flavour": 1}),
        lambda: build_spec(from_schema(forward, "refund", SCHEMA), options={"flavour": 1}),
        lambda: tool_options({"refund": {"flavour": "vanilla"}}, {}),
    ):
        with pytest.raises(TypeError, match="flavour"):
            build()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"editable": ["amount"], "redact": ["amount"]}, "both redacted and editable"),
        ({"editable": ["nothing"]}, "editable names 'nothing'"),
        ({"exclude": ["nothing"]}, "exclude names parameters"),
        ({"redact": ["nothing"]}, "has no parameter 'nothing'"),
        ({"timeout": "25h"}, "timeout must be whole seconds"),
        ({"editable": "amount"}, "not a string"),
    ],
)
def test_every_shape_refuses_a_bad_option_the_same_way(options: dict[str, Any], words: str) -> None:
    """Each check is written once: the same options fail the same way whatever the shape."""
    for shape in (
        from_signature(refund),
        from_names(forward, "refund", ["amount"]),
        from_schema(forward, "refund", SCHEMA),
    ):
        with pytest.raises(ConfigurationError, match=words):
            build_spec(shape, options=options, name="refund")
