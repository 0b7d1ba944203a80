"""TemporalDevServer refuses ports that are taken before it starts anything."""

from __future__ import annotations

import socket

import pytest

from cardloop.app.devserver import DevStackError, TemporalDevServer, free_port


@pytest.mark.parametrize("which", ["port", "ui_port"])
def test_a_taken_port_is_named_before_the_server_starts(which: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        ports = {"port": free_port(), "ui_port": free_port(), which: busy}
        server = TemporalDevServer(**ports, retention=None)
        with pytest.raises(DevStackError, match=f"port {busy} .*already in use"):
            server.start()
        assert server.process is None
