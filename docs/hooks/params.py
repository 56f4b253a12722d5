"""A griffe extension for the API reference: every public parameter must be described.

griffe itself warns about a documented parameter the signature lacks, never
about a parameter the docstring leaves out. This extension does, once the
``approval_guard`` package is loaded: for every name in the ``__all__`` of the
modules the reference documents, each parameter of a public function, method
or constructor (an attrs class's fields included) must be described in its
docstring's ``Args:`` (or, for fields, ``Attributes:``) section. Each gap is a
warning, and ``mkdocs build --strict`` fails on a warning.
"""

from __future__ import annotations

import enum
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import griffe

#: The modules whose public names the API reference documents.
DOCUMENTED = (
    "approval_guard",
    "approval_guard.exceptions",
    "approval_guard.testing",
    "approval_guard.adk",
    "approval_guard.claude",
    "approval_guard.crewai",
    "approval_guard.dbos",
    "approval_guard.langchain",
    "approval_guard.pydantic_ai",
    "approval_guard.mcp_proxy",
)

_SECTIONS = (
    griffe.DocstringSectionKind.parameters,
    griffe.DocstringSectionKind.other_parameters,
    griffe.DocstringSectionKind.attributes,
)


def public_names(module: Any) -> list[str]:
    """``module.__all__``, else the public names the module itself defines."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    ]


def described(doc: str | None) -> set[str]:
    """The names an ``Args:``/``Attributes:`` section of ``doc`` describes (``*``s dropped)."""
    if not doc:
        return set()
    sections = griffe.Docstring(doc).parse("google", warnings=False)
    names: set[str] = set()
    for section in sections:
        if section.kind in _SECTIONS:
            for item in section.value:
                if item.description.strip():
                    names.add(item.name.lstrip("*"))
    return names


def _parameters(fn: Callable[..., Any]) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def gaps(label: str, obj: Any) -> Iterator[str]:
    """``"label: parameter"`` for each public parameter of ``obj`` left undescribed."""
    if inspect.isclass(obj):
        if issubclass(obj, enum.Enum):
            return
        own = described(inspect.getdoc(obj))
        if attrs.has(obj):
            fields = [field.name for field in attrs.fields(obj) if field.init]
            yield from (f"{label}: {name}" for name in fields if name not in own)
        elif (
            "__init__" in vars(obj) and getattr(vars(obj)["__init__"], "__module__", "") != "typing"
        ):
            # (A Protocol's __init__ is typing's placeholder: nothing to describe.)
            init = vars(obj)["__init__"]
            known = own | described(inspect.getdoc(init))
            yield from (f"{label}: {name}" for name in _parameters(init) if name not in known)
        for name, member in vars(obj).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            yield from gaps(f"{label}.{name}", member)
        return
    if inspect.isroutine(obj):
        known = described(inspect.getdoc(obj))
        yield from (f"{label}: {name}" for name in _parameters(obj) if name not in known)


class EveryParameterDescribed(griffe.Extension):
    """Warns (through griffe's logger: a mkdocs warning) of each undescribed public parameter."""

    def __init__(self) -> None:
        super().__init__()
        self._done = False

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "approval_guard" or self._done:
            return
        self._done = True
        for module_name in DOCUMENTED:
            module = importlib.import_module(module_name)
            for name in public_names(module):
                for gap in gaps(f"{module_name}.{name}", getattr(module, name)):
                    griffe.logger.warning(f"undescribed parameter of a public name: {gap}")
