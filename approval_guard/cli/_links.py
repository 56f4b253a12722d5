"""A reviewer's channel identities on the command line: each channel's flag, and ``--channel``.

``reviewers add`` and ``reviewers link`` take every registered channel's own
flag (``--slack-user U...``, ``--email ADDRESS``, and each registered
channel's own) and the generic ``--channel KIND:ID`` (repeatable).
Each identity is checked by its channel before anything is stored; a bad one
is a usage error (exit 2).
"""

from __future__ import annotations

import argparse

from approval_guard.cli._output import UsageError


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_identity_arguments(parser: argparse.ArgumentParser) -> None:
    """Every registered channel's identity flag, and ``--channel KIND:ID``."""
    from approval_guard.provider.channels.registry import identities

    for kind, identity in identities().items():
        parser.add_argument(
            identity.flag,
            dest=_dest(identity.flag),
            metavar=identity.metavar,
            help=f"their identity on {kind}: its messages and clicks are checked against it",
        )
    parser.add_argument(
        "--channel",
        action="append",
        default=[],
        dest="channel_links",
        metavar="KIND:ID",
        help=f"their identity on a channel ({', '.join(identities())}); repeatable",
    )


def identities_from_args(args: argparse.Namespace) -> dict[str, str]:
    """``{kind: identity}`` the flags name, each checked; :class:`UsageError` for a bad one."""
    from approval_guard.provider.channels.registry import identities

    known = identities()
    given: list[tuple[str, str, str]] = []
    for kind, identity in known.items():
        value = getattr(args, _dest(identity.flag), None)
        if value is not None:
            given.append((kind, value, identity.flag))
    for entry in getattr(args, "channel_links", None) or []:
        kind, sep, value = str(entry).partition(":")
        if not sep or kind not in known or not value:
            raise UsageError(
                f"--channel takes KIND:ID with KIND one of {', '.join(known)}, not {entry!r}"
            )
        given.append((kind, value, "--channel"))
    links: dict[str, str] = {}
    for kind, value, flag in given:
        try:
            checked = known[kind].check(value)
        except ValueError as exc:
            raise UsageError(f"{flag}: {exc}") from None
        if links.get(kind, checked) != checked:
            raise UsageError(f"two identities given for {kind}: give one")
        links[kind] = checked
    return links
