"""The HTTP side: a standard-library threading server on loopback, keep-alive like the API, that
hands each request to its ScriptedModel and writes the answer (JSON, or chunked server-sent events)."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from cardloop.app.scripted_model.streaming import stream_events
from cardloop.app.scripted_model.wire import Answer

if TYPE_CHECKING:
    from cardloop.app.scripted_model.model import ScriptedModel


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds ~40 ms to each answer.
    disable_nagle_algorithm = True
    server: Server

    def setup(self) -> None:
        super().setup()
        self.server.model._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.model._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and demos assert on recorded requests, not on access logs

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self) -> None:
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server.model._handle(self.command, self.path, headers, raw)
        if answer is None:
            self.close_connection = True  # stopped while sleeping: drop the connection, like a crash
            return
        if answer.stream:
            self._send_stream(answer)
            return
        data = json.dumps(answer.body).encode()
        self.send_response(answer.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, answer: Answer) -> None:
        # Chunked, as the API sends it: the length is unknown up front and the connection stays reusable.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        deltas = 0
        for name, data in stream_events(answer.body):
            if name == "content_block_delta":
                if deltas and not self.server.model._sleep(answer.chunk_delay):
                    self.close_connection = True  # stopped mid-stream: cut it off, no final chunk
                    return
                deltas += 1
            # Compact JSON, one `data:` line per event, exactly as the API sends them.
            frame = f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a handler sleeping on an injected delay
    request_queue_size = 128  # benchmarks open many connections at once

    def __init__(self, address: tuple[str, int], model: ScriptedModel) -> None:
        self.model = model
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is what timeout tests do on purpose.
        if isinstance(sys.exc_info()[1], ConnectionError | OSError):
            return
        super().handle_error(request, client_address)
