"""The floor of the stack: bare Starlette long polls on uvicorn, no store, no auth.

``python -m benchmarks._server_floor [--port 0]`` prints one JSON line
``{"url": ...}`` once it is serving, as ``approval_guard.provider.serving.process``
does, so the server benchmark drives both with the same clients:

- ``POST /v1/requests`` parses the JSON body and answers 201 with a new id;
- ``GET /v1/requests/{id}?wait=60s`` waits on that id's ``asyncio.Event``;
- ``POST /v1/requests/{id}/decision`` parses its body and sets the event.

It parses HTTP as the provider does (httptools when installed, else h11), so
the floor stays a fair one. Whatever the provider does beyond this (auth,
validation, the store, the change feed) is its cost over the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from approval_guard.provider.http.protocols import has_httptools

from ._common import raise_fd_limit

_events: dict[str, asyncio.Event] = {}


def _event(request_id: str) -> asyncio.Event:
    event = _events.get(request_id)
    if event is None:
        event = _events[request_id] = asyncio.Event()
    return event


def _wait_seconds(raw: str) -> float:
    """``"60s"`` -> 60.0; the floor reads only the plain seconds form the benchmark sends."""
    try:
        return float(raw.removesuffix("s"))
    except ValueError:
        return 0.0


async def create(request: Request) -> JSONResponse:
    await request.json()
    return JSONResponse({"id": uuid.uuid4().hex, "status": "pending"}, status_code=201)


async def poll(request: Request) -> JSONResponse:
    request_id = request.path_params["id"]
    event = _event(request_id)
    wait = _wait_seconds(request.query_params.get("wait", "0s"))
    if not event.is_set() and wait > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), wait)
    status = "approved" if event.is_set() else "pending"
    return JSONResponse({"id": request_id, "status": status})


async def decide(request: Request) -> JSONResponse:
    request_id = request.path_params["id"]
    await request.json()
    _event(request_id).set()
    return JSONResponse({"id": request_id, "status": "approved"})


app = Starlette(
    routes=[
        Route("/v1/requests", create, methods=["POST"]),
        Route("/v1/requests/{id}", poll, methods=["GET"]),
        Route("/v1/requests/{id}/decision", decide, methods=["POST"]),
    ]
)


async def _serve(host: str, port: int) -> None:
    # proto IPPROTO_TCP, or asyncio does not set TCP_NODELAY on accepted connections
    # (and Nagle plus delayed ACKs hold each small answer ~40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    parser = "httptools" if has_httptools() else "h11"
    config = uvicorn.Config(
        app, http=parser, loop="asyncio", lifespan="off", log_level="warning", backlog=4096
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("uvicorn stopped before it started serving")
        await asyncio.sleep(0.01)
    bound_host, bound_port = sock.getsockname()[:2]
    print(json.dumps({"url": f"http://{bound_host}:{bound_port}"}), flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    raise_fd_limit(20_000)
    asyncio.run(_serve(args.host, args.port))


if __name__ == "__main__":
    main()
