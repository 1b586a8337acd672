"""A real HTTP server on 127.0.0.1 that speaks an OpenAI-style JSON API, run in a thread.

Stands in for the model servers mnemo talks to (embeddings, chat completions): each route is a
function from the request body to the answer body; ``Behaviour`` makes the next answers fail,
wait or come back malformed, and records every request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Behaviour:
    """What the server does next; tests set it, the handler reads it."""

    status: int = 200
    body: bytes | None = None  # sent as is, instead of the route's answer
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)


def make_handler(routes: dict[str, Route], behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            behaviour.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            time.sleep(behaviour.delay_s)
            if self.path not in routes:
                return self._send(404, b'{"error": "not found"}')
            if behaviour.status != 200:
                return self._send(behaviour.status, b'{"error": {"message": "model overloaded"}}')
            if behaviour.body is not None:
                return self._send(200, behaviour.body)
            self._send(200, json.dumps(routes[self.path](body)).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@contextmanager
def serving(routes: dict[str, Route], behaviour: Behaviour) -> Iterator[str]:
    """The server's base URL while it runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(routes, behaviour))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
