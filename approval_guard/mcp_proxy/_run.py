"""Running the proxy: start the child server, check the rules against its tools, serve the client.

The child is any stdio MCP server, started as a subprocess with the proxy's
own environment less every ``APPROVAL_GUARD_*`` variable (the instance
credential is the proxy's, never the child's); its stderr is the proxy's.
The proxy then speaks MCP to its client on its own stdin/stdout, or as a
streamable-HTTP server on ``listen`` (``http://HOST:PORT/mcp``). When the
client goes away (stdin closes), the child is stopped and the proxy exits.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from approval_guard._codec.duration import format_duration
from approval_guard.exceptions import ConfigurationError
from approval_guard.mcp_proxy._guarded import GuardedTools
from approval_guard.mcp_proxy._rules import ProxyRules
from approval_guard.mcp_proxy._server import (
    all_tools,
    build_server,
    forward_call,
    unreadable_list,
)

if TYPE_CHECKING:
    from approval_guard._guard import Guard

log = logging.getLogger("approval_guard")


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the proxy's, without ``APPROVAL_GUARD_*`` (secrets stay here)."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items() if not name.startswith("APPROVAL_GUARD_")}


def run_proxy(
    command: Sequence[str],
    *,
    guard: Guard,
    rules: ProxyRules,
    listen: tuple[str, int] | None = None,
    start_timeout: float = 30.0,
) -> None:
    """Run ``command`` as the child MCP server and relay to it, guarding as ``rules`` say.

    Blocks until the client goes away (stdio) or the process is interrupted
    (HTTP). Raises ConfigurationError, after stopping the child, when
    ``rules`` name a tool or an argument the child does not have; OSError
    when the command cannot be started, and TimeoutError (an OSError) after
    stopping a child that does not answer ``initialize`` within
    ``start_timeout`` seconds. A tool list the proxy cannot read is one
    logged line: no tool is passed on until the child lists them properly.

    Args:
        command: The child MCP server's command and arguments.
        guard: The Guard that asks its provider (its ledger, clock and settings apply).
        rules: What is guarded, and how.
        listen: ``(host, port)`` to serve streamable HTTP on (loopback only); None: stdio.
        start_timeout: Seconds the child may take to answer ``initialize``.
    """
    import anyio

    if not command:
        raise ConfigurationError("mcp-proxy needs the command of the MCP server to run")
    try:
        anyio.run(_serve, list(command), guard, rules, listen, start_timeout)
    except BaseException as exc:
        raise _alone(exc) from None


def _alone(exc: BaseException) -> BaseException:
    """The one exception inside task groups' exception groups (anyio wraps what they raise)."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or len(inner) != 1:
            return exc
        exc = inner[0]


async def _serve(
    command: list[str],
    guard: Guard,
    rules: ProxyRules,
    listen: tuple[str, int] | None,
    start_timeout: float,
) -> None:
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=command[0], args=command[1:], env=child_environment(), cwd=os.getcwd()
    )
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as child,
    ):
        try:
            with anyio.fail_after(start_timeout):
                await child.initialize()
        except TimeoutError:
            raise TimeoutError(
                f"it did not answer MCP's initialize within {format_duration(start_timeout)}; "
                "the proxy stopped it"
            ) from None
        guarded = GuardedTools(
            guard, rules, lambda tool, arguments: forward_call(child, tool, arguments)
        )
        try:
            schemas = await all_tools(child)
        except ConfigurationError:
            raise
        except Exception as exc:  # an answer that is not MCP's shape: one line, no traceback
            log.error(
                "mcp-proxy: %s; no tool is passed on until it lists them", unreadable_list(exc)
            )
            schemas = {}
        else:
            rules.check_tools(schemas)
        guarded.learn(schemas)
        for name in sorted(schemas):
            log.info("mcp-proxy: %s %s", "guards" if rules.guards(name) else "relays", name)
        server = build_server(child, guarded)
        if listen is None:
            await _serve_stdio(server)
        else:
            await _serve_http(server, *listen)


async def _serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Any, host: str, port: int) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # DNS-rebinding protection on whatever loopback address is served (mcp turns it on by
    # itself only for three spellings: 127.0.0.2 or ::ffff:127.0.0.1 would go unchecked).
    names = ["127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in dict.fromkeys(names)],
        allowed_origins=[f"http://{name}:*" for name in dict.fromkeys(names)],
    )
    app = server.streamable_http_app(host=host, transport_security=security)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
