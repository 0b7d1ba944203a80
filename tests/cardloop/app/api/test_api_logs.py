"""What the API logs about a sender's requests: one line per event, whatever the sender put in
its fields, and a client that hangs up mid-body is one line without a traceback (a real uvicorn
on loopback, a real socket closed half-way)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import create_app
from cardloop.app.api.logsafe import escape_controls
from cardloop.app.api.services import Services
from cardloop.app.boards.adapters import build_adapters
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.store import Store

from .webhook_kit import SECRET, hub_signature

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[object]:
    config = load_config(REPO_CONFIG, env={"CARDLOOP_GENERIC_WEBHOOK_SECRET": SECRET})
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    async with httpx.AsyncClient() as http:
        svc = Services(config=config, store=store, runtime=ActivityDeps.build(config, store), cards=None, http=http,
                       adapters=build_adapters(config, http))
        yield create_app(svc)
    store.close()


def test_escape_controls_keeps_one_line_and_marks_what_it_escaped() -> None:
    assert escape_controls("plain text, Café ✓") == "plain text, Café ✓"
    assert escape_controls("a\nb\r\nc") == "a\\x0ab\\x0d\\x0ac"
    assert escape_controls("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"          # terminal escapes
    assert escape_controls("pay\u202e241-YAP zero\u200bwidth") == "pay\\u202e241-YAP zero\\u200bwidth"
    assert escape_controls("line\u2028sep \ud800") == "line\\u2028sep \\ud800"
    assert escape_controls("a\\x0ab") == "a\\\\x0ab"   # a sender's backslash cannot pass for an escape


async def test_a_field_name_with_a_newline_cannot_forge_a_log_line(app, caplog: pytest.LogCaptureFixture) -> None:
    forged = "stgae\n2025-01-01 00:00:00 ERROR cardloop: admin token rotated"
    body = json.dumps({"card_id": "OPS-7", "stage": "coding", "delivery_id": "d-1", forged: 1}).encode()
    caplog.set_level(logging.INFO)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cardloop") as api:
        r = await api.post("/webhooks/generic", content=body, headers={"x-hub-signature-256": hub_signature(body)})
    assert r.status_code == 400 and "stgae" in r.json()["detail"]
    records = [rec for rec in caplog.records if rec.name.startswith("cardloop.")]
    assert records, "the refusal is logged"
    lines = [logging.Formatter("%(levelname)s %(name)s: %(message)s").format(rec) for rec in records]
    assert all("\n" not in line for line in lines), lines
    assert any("stgae\\x0a2025-01-01" in line for line in lines), lines


async def test_a_client_that_disconnects_mid_body_is_one_line_without_a_traceback(
        app, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="info"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        head = ("POST /webhooks/generic HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: 5000\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n\r\n")
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(head.encode() + b'{"card_id": "OPS-7", "sta')   # then the client goes away
        for _ in range(500):
            if any("disconnect" in rec.getMessage() or rec.exc_info for rec in caplog.records):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)   # anything else the disconnect would log arrives by now
    finally:
        server.should_exit = True
        await serving
    told = [rec for rec in caplog.records if "disconnect" in rec.getMessage()]
    assert len(told) == 1, [rec.getMessage() for rec in caplog.records]
    assert "POST /webhooks/generic" in told[0].getMessage()
    assert not any(rec.exc_info for rec in caplog.records), [rec.getMessage() for rec in caplog.records]
    assert not any("unhandled error" in rec.getMessage() for rec in caplog.records)
