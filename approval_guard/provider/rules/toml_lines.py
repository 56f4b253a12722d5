"""Where a key or table sits in a rules file's text: tomllib gives values, not line numbers."""

from __future__ import annotations

import re


class Lines:
    """Finds the line of a table header or a key in the text (tomllib does not say)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def of_table(self, *path: str) -> int:
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if stripped.startswith("[") and header_path(stripped) == path:
                return number
        # No header of its own: `name = {...}` in its parent table, or a dotted key.
        if path:
            name = re.escape(path[-1])
            dotted = r"\.".join(rf"[\"']?{re.escape(part)}[\"']?" for part in path)
            inline = re.compile(rf"^\s*[\"']?{name}[\"']?\s*(=|\.)")
            anywhere = re.compile(rf"^\s*{dotted}\s*(=|\.)")
            parent = self.of_table(*path[:-1]) if len(path) > 1 else 1
            for number, line in enumerate(self.lines, 1):
                if anywhere.match(line) or (number >= parent and inline.match(line)):
                    return number
        return 1

    def of_key(self, path: tuple[str, ...], key: str) -> int:
        start = self.of_table(*path) if path else 1
        word = rf"(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})"
        pattern = re.compile(rf"^\s*{word}\s*=")
        # On the table's own line (an inline table), or a dotted key below it.
        same_line = re.compile(rf"[{{,]\s*{word}\s*=")
        if start <= len(self.lines) and same_line.search(self.lines[start - 1]):
            return start
        dotted = re.compile(rf"\.{word}\s*=")
        for number in range(start, len(self.lines) + 1):
            line = self.lines[number - 1]
            if number > start and line.strip().startswith("["):
                break
            if pattern.match(line) or (number > start and dotted.search(line)):
                return number
        return start


def header_path(header: str) -> tuple[str, ...]:
    inner = header.strip("[]").split("#")[0].strip()
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', inner)
    return tuple(a or b or c for a, b, c in parts)


def array_lines(lines: Lines, path: tuple[str, ...]) -> list[int]:
    """The line of each ``[[a.b.c]]`` header of this array of tables, in order."""
    out = []
    for number, line in enumerate(lines.lines, 1):
        stripped = line.strip()
        if stripped.startswith("[[") and header_path(stripped) == path:
            out.append(number)
    return out


def key_after(lines: Lines, start: int, key: str) -> int:
    """The line of ``key = ...`` in the table starting at ``start`` (else ``start``)."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number in range(start + 1, len(lines.lines) + 1):
        text = lines.lines[number - 1]
        if text.strip().startswith("["):
            break
        if pattern.match(text):
            return number
    return start
