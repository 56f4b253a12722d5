"""Which connection protocol serves: httptools' when it is installed, else h11's."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def has_httptools() -> bool:
    """True when the ``httptools`` parser can be imported."""
    return importlib.util.find_spec("httptools") is not None


def check_parser(parser: str) -> str:
    """``parser`` if it names a parser that can serve here; ``ValueError`` otherwise."""
    if parser not in ("auto", "httptools", "h11"):
        raise ValueError(f"http_parser must be 'auto', 'httptools' or 'h11', not {parser!r}")
    if parser == "httptools" and not has_httptools():
        raise ValueError("http_parser='httptools' needs httptools installed")
    return parser


def protocol_class(
    client_timeout: float, *, parser: str = "auto"
) -> type[H11Protocol] | type[HttpToolsProtocol]:
    """The protocol class for uvicorn's ``Config(http=...)``, with this head deadline.

    ``parser``: ``"httptools"``, ``"h11"``, or ``"auto"`` (httptools when installed).
    """
    if parser == "httptools" or (parser == "auto" and has_httptools()):
        from approval_guard.provider.http import httptools_protocol

        return httptools_protocol.protocol_class(client_timeout)
    check_parser(parser)
    from approval_guard.provider.http import h11

    return h11.protocol_class(client_timeout)
