"""The dev stack's in-process HTTP servers: a port reserved before anyone is told it, and a clear
error (not the process exiting 3 from inside the event loop) when a server cannot listen."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from typing import Any

import pytest

from cardloop.app.devserver import DevStackError
from cardloop.app.stack import reserve_loopback, serve_in_loop

pytestmark = pytest.mark.timeout(60)


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The smallest ASGI app: 200 "hello" to any request."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_taken_port_is_replaced_by_one_the_system_picks() -> None:
    with listening() as taken, reserve_loopback(taken.getsockname()[1]) as sock:
        assert sock.getsockname()[1] != taken.getsockname()[1]


def test_a_reserved_port_cannot_be_taken_before_it_serves() -> None:
    with reserve_loopback(0) as sock, socket.socket() as other:
        # uvicorn binds with SO_REUSEADDR: a port merely bound, not listening, would be shared.
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with pytest.raises(OSError):
            other.bind(("127.0.0.1", sock.getsockname()[1]))


async def test_a_server_serves_on_its_reserved_socket() -> None:
    sock = reserve_loopback(0)
    port = sock.getsockname()[1]
    server = await serve_in_loop(hello, "127.0.0.1", port, "test server", sock)
    try:
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read())
        assert body == b"hello"
    finally:
        await server.stop()
        sock.close()


async def test_a_server_that_cannot_listen_says_so_and_the_process_goes_on() -> None:
    with listening() as taken:
        port = taken.getsockname()[1]
        said = rf"the API could not start on 127\.0\.0\.1:{port} \(the port is in use\)"
        with pytest.raises(DevStackError, match=said):
            await serve_in_loop(hello, "127.0.0.1", port, "API")
    # Still here: uvicorn's sys.exit(3) did not end the test process.
    assert (await asyncio.to_thread(lambda: 1 + 1)) == 2
