"""The package's layout is its design: subpackages by idea, one import path per name, no cycles."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "approval_guard"
#: The only modules at the top of the package: its entry points.
ENTRY_POINTS = {
    "__init__.py",
    "__main__.py",
    "_decorator.py",
    "_default.py",
    "_env.py",
    "_guard.py",
    "_harness.py",
    "_input.py",
    "_otel.py",
    "exceptions.py",
    "pytest_plugin.py",
}
LONGEST_MODULE = 420
#: Public packages that plug the guard into an agent framework: each imports its
#: framework and the core; the core never imports them.
INTEGRATIONS = (
    "approval_guard.adk",
    "approval_guard.claude",
    "approval_guard.crewai",
    "approval_guard.dbos",
    "approval_guard.langchain",
    "approval_guard.pydantic_ai",
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports_at_import_time(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports when it is imported (not lazily, not typing)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If):
                if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                    visit(node.orelse)
                else:
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    out.add(full if full in known else base)
            elif isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)

    visit(tree.body)
    return {module for module in out if module in known and module != name}


def test_no_module_imports_itself_through_others() -> None:
    """The import graph of the package is acyclic (a cycle breaks as soon as the order changes)."""
    known = _modules()
    graph = {name: _imports_at_import_time(name, path, known) for name, path in known.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def walk(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
                return True
            if nxt not in state and walk(nxt, [*trail, nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if start not in state and walk(start, [start]):
            break
    assert [] == cycle


def test_the_top_of_the_package_holds_only_its_entry_points() -> None:
    """Code lives in subpackages (_options, _call, _transport, _codec, _ledger, ...)."""
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert ENTRY_POINTS == top


def test_no_module_holds_more_than_one_job_by_size() -> None:
    """A module past ~400 lines usually holds two jobs (the review page's static files aside)."""
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LONGEST_MODULE
    }
    assert {} == long


@pytest.mark.parametrize(
    "old",
    [
        "approval_guard.provider._store",
        "approval_guard.provider._server",
        "approval_guard.provider._cli",
        "approval_guard._wait",
        "approval_guard._plan",
        "approval_guard._policies",
    ],
)
def test_old_module_paths_are_gone(old: str) -> None:
    """Each name has one import path: the hubs that re-exported others' names are deleted."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_core_imports_nothing_of_the_provider_or_testing() -> None:
    """The guard's own modules never import the local provider or the test helpers."""
    known = _modules()
    core = [
        name
        for name in known
        if not name.startswith(
            (
                "approval_guard.provider",
                "approval_guard.testing",
                "approval_guard.cli",
                "approval_guard.pytest_plugin",
                *INTEGRATIONS,
            )
        )
    ]
    offending = {
        name: sorted(
            m
            for m in _imports_at_import_time(name, known[name], known)
            if m.startswith(("approval_guard.provider", "approval_guard.testing"))
        )
        for name in core
    }
    assert {} == {name: mods for name, mods in offending.items() if mods}


def test_the_core_imports_no_framework_integration() -> None:
    """Integration packages import the core; nothing outside them imports one of them."""
    known = _modules()
    offending = {
        name: sorted(
            m for m in _imports_at_import_time(name, path, known) if m.startswith(INTEGRATIONS)
        )
        for name, path in known.items()
        if not name.startswith(INTEGRATIONS)
    }
    assert {} == {name: mods for name, mods in offending.items() if mods}


@pytest.mark.parametrize("package", INTEGRATIONS)
def test_an_integration_imports_no_other_integration(package: str) -> None:
    """Each integration stands alone: it imports the core, never another integration."""
    known = _modules()
    others = tuple(other for other in INTEGRATIONS if other != package)
    offending = {
        name: sorted(m for m in _imports_at_import_time(name, path, known) if m.startswith(others))
        for name, path in known.items()
        if name.startswith(package)
    }
    assert {} == {name: mods for name, mods in offending.items() if mods}


@pytest.mark.parametrize("package", INTEGRATIONS)
def test_an_integration_is_a_package_with_private_modules(package: str) -> None:
    """Each integration is approval_guard/<name>/: a thin __init__.py and private modules."""
    folder = PACKAGE / package.rpartition(".")[2]
    assert (folder / "__init__.py").is_file()
    public = sorted(p.name for p in folder.glob("*.py") if not p.name.startswith("_"))
    assert [] == public


#: The only code that may call the store's ``decide`` / ``decide_granting``: the store
#: itself and the one decision function every channel decides through.
DECIDERS = ("provider/store/", "provider/channels/decisions.py")


def _store_decisions(path: Path) -> list[int]:
    """Lines of ``path`` calling a store's ``decide``/``decide_granting`` (a receiver named
    ``*store*``, or a ``reviewer=`` keyword as only the store's take: not the CLI's client)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in ("decide", "decide_granting"):
            continue
        receiver = ast.unparse(node.func.value).lower()
        keywords = {one.arg for one in node.keywords}
        if "store" in receiver or "reviewer" in keywords or node.func.attr == "decide_granting":
            found.append(node.lineno)
    return found


def test_only_the_one_decision_function_calls_the_stores_decide() -> None:
    """Every channel decides through provider/channels/decisions.py, never the store directly."""
    offending = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(DECIDERS)
        and (lines := _store_decisions(path))
    }
    assert {} == offending


def test_the_decision_pin_sees_a_store_call() -> None:
    """The pin above finds the calls it forbids (it is not vacuous)."""
    assert _store_decisions(PACKAGE / "provider" / "channels" / "decisions.py")
