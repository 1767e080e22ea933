"""A webhook receiver on 127.0.0.1 for the notification tests: it keeps every body it is posted, by path, and answers
by path as the platforms do: ``/down`` HTTP 500, ``/silent`` never (until the receiver stops), ``/wecom`` and
``/dingtalk`` ``{"errcode": 0}``, ``/feishu`` ``{"code": 0}``, anything else 200 ``ok``."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ANSWERS = {"wecom": b'{"errcode": 0, "errmsg": "ok"}', "dingtalk": b'{"errcode": 0, "errmsg": "ok"}',
           "feishu": b'{"code": 0, "data": {}, "msg": "success"}'}


@dataclass
class Receiver:
    port: int = 0
    got: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def bodies(self, path: str) -> list[dict[str, object]]:
        return self.got.get(path, [])


@contextmanager
def receiving() -> Iterator[Receiver]:
    found = Receiver()
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            path = urlsplit(self.path).path.strip("/")
            found.got.setdefault(path, []).append(body)
            if path == "silent":
                stop.wait(30)
                return
            self.send_response(500 if path == "down" else 200)
            self.end_headers()
            self.wfile.write(b"down" if path == "down" else ANSWERS.get(path, b"ok"))

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    found.port = server.server_address[1]
    try:
        yield found
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
