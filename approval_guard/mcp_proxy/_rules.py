"""Which relayed tools are guarded, and how: glob patterns, editable and redacted arguments.

Everything here is checked twice, as early as it can be: the command line's
text when the rules are made (before the child server starts), and the
child's tool list once it is known (:meth:`ProxyRules.check_tools`): an
``--editable`` or ``--redact`` naming a tool the child does not have, or an
argument its ``inputSchema`` does not list, is an error then, not a silent
no-op.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from approval_guard._codec.duration import DurationLike
from approval_guard._options.options import DEFAULT_TIMEOUT
from approval_guard._options.schema import schema_converter
from approval_guard._options.shape import unknown_tool
from approval_guard._options.spec import MAX_TIMEOUT, build_spec, seconds_option
from approval_guard.exceptions import ConfigurationError

__all__ = ["ProxyRules"]

#: What a glob may hold: a tool name's characters and ``* ? [ ] !``.
_PATTERN = re.compile(r"[A-Za-z0-9_.\-/*?\[\]!]{1,200}")


def _patterns(text: str | Sequence[str]) -> tuple[str, ...]:
    parts = text.split(",") if isinstance(text, str) else list(text)
    found = tuple(part.strip() for part in parts)
    if not found or any(not part for part in found):
        raise ConfigurationError(
            "--guard must be tool-name patterns separated by commas, like 'write_*,delete_*'"
        )
    for part in found:
        if not _PATTERN.fullmatch(part) or part.count("[") != part.count("]"):
            raise ConfigurationError(
                f"--guard pattern {part!r} is not a glob of a tool name (letters, digits, "
                "'_-./', and '*', '?', '[...]')"
            )
    return found


def _pairs(items: Iterable[str], flag: str) -> dict[str, tuple[str, ...]]:
    """``["write_file:path", "write_file:mode"]`` -> ``{"write_file": ("mode", "path")}``."""
    out: dict[str, set[str]] = {}
    for item in items:
        tool, sep, arg = item.partition(":")
        if not sep or not tool.strip() or not arg.strip() or tool != tool.strip():
            raise ConfigurationError(
                f"{flag} takes TOOL:ARGUMENT (for example write_file:path), not {item!r}"
            )
        out.setdefault(tool, set()).add(arg.strip())
    return {tool: tuple(sorted(args)) for tool, args in sorted(out.items())}


@attrs.frozen
class ProxyRules:
    """What ``mcp-proxy`` guards: tool-name globs, the approval window, editable/redacted args.

    ::

        rules = ProxyRules.parse(guard="write_*,delete_*", timeout="10m",
                                 editable=["write_file:content"])
        rules.guards("write_file")   # True
        rules.guards("read_file")    # False: relayed without a request

    Patterns are :mod:`fnmatch` globs matched on the child's own tool name,
    ignoring case. A bad pattern, duration or ``TOOL:ARGUMENT`` raises
    :class:`~approval_guard.exceptions.ConfigurationError`.

    Attributes:
        patterns: The tool-name globs that are guarded.
        timeout: The approval window to ask for, in seconds.
        editable: Each tool's arguments a reviewer may change.
        redact: Each tool's arguments (or dotted paths) shown only as a keyed digest.
    """

    patterns: tuple[str, ...]
    timeout: float
    editable: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    redact: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    @classmethod
    def parse(
        cls,
        *,
        guard: str | Sequence[str],
        timeout: DurationLike = DEFAULT_TIMEOUT,
        editable: Iterable[str] = (),
        redact: Iterable[str] = (),
    ) -> ProxyRules:
        """Rules from the command line's text; a bad one raises ConfigurationError."""
        patterns = _patterns(guard)
        try:
            seconds = seconds_option(timeout, "--timeout")
        except ConfigurationError as exc:
            said = str(exc)
            raise ConfigurationError(
                said if "--timeout" in said else f"--timeout {timeout!r}: {said}"
            ) from None
        if seconds != int(seconds) or not 1 <= seconds <= MAX_TIMEOUT:
            raise ConfigurationError(
                f"--timeout must be whole seconds between 1s and 24h, got {timeout!r}"
            )
        rules = cls(
            patterns=patterns,
            timeout=seconds,
            editable=_pairs(editable, "--editable"),
            redact=_pairs(redact, "--redact"),
        )
        for flag, named in (("--editable", rules.editable), ("--redact", rules.redact)):
            for tool in named:
                if not rules.guards(tool):
                    raise ConfigurationError(
                        f"{flag} names {tool!r}, which no --guard pattern matches: its calls "
                        "are relayed without a request, so there is nothing to edit or redact"
                    )
        # The one builder checks each tool's options now (their form, and nothing both
        # redacted and editable); the names are checked once the child lists its tools.
        for tool in sorted({*rules.editable, *rules.redact}):
            build_spec(
                unknown_tool(),
                options={
                    "editable": rules.editable.get(tool, ()),
                    "redact": rules.redact.get(tool),
                },
                name=tool,
            )
        return rules

    def guards(self, tool: str) -> bool:
        """Whether calls of ``tool`` need approval (some pattern matches its name).

        Case-insensitively: a server that looks tool names up loosely must not be
        reachable around the guard by ``WRITE_FILE`` (guarding more is never unsafe).

        Args:
            tool: The child's own tool name.
        """
        name = tool.casefold()
        return any(fnmatch.fnmatchcase(name, pattern.casefold()) for pattern in self.patterns)

    def check_tools(self, tools: Mapping[str, Mapping[str, Any]]) -> None:
        """Check ``--editable``/``--redact`` against the child's tools (name -> ``inputSchema``).

        Raises ConfigurationError naming the first tool or argument that is not
        there, or whose schema no edit can be converted to.

        Args:
            tools: Each tool the child lists -> its ``inputSchema``.
        """
        for flag, named in (("--editable", self.editable), ("--redact", self.redact)):
            for tool, args in named.items():
                schema = tools.get(tool)
                if schema is None:
                    raise ConfigurationError(
                        f"{flag} names the tool {tool!r}, which the server does not list "
                        f"(it lists: {', '.join(sorted(tools)) or 'no tools'})"
                    )
                properties = schema.get("properties") or {}
                for arg in args:
                    top = arg.split(".")[0] if flag == "--redact" else arg
                    if top not in properties:
                        raise ConfigurationError(
                            f"{flag} names {tool}:{arg}, but the input schema of {tool!r} has no "
                            f"property {top!r}"
                        )
                    if flag == "--editable":
                        schema_converter(arg, properties[arg])
