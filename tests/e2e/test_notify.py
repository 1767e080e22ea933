"""Notifications (issue 33) end to end: a spot job posts its events to receivers on 127.0.0.1 through every
controller that drives it. The first `cvmjob run` is SIGKILLed while training; the instance is reclaimed; a `cvmjob
resume` records the reclaim and is killed at once (CVMJOB_CRASH_AT: before its sender could post it); a second
resume posts it, relaunches and succeeds. Each event reaches each receiver once, and receivers that answer 500 or
never answer hold nothing up."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import Cli
from tests.e2e.spot_support import JobWatch, job_folder, tiny_command
from tests.e2e.test_spot import finish
from tests.holding import held, release

pytestmark = pytest.mark.e2e

EVENTS = "[succeeded, failed, cancelled, reclaimed]"


@dataclass
class Receivers:
    """Four receivers on one server, by path: /json and /wecom take every message, /down answers 500, /silent
    never answers."""

    port: int = 0
    got: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    found = Receivers()
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
            self.wfile.write(b'{"errcode": 0, "errmsg": "ok"}' if path == "wecom" else b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    found.port = server.server_address[1]
    yield found
    stop.set()
    server.shutdown()
    server.server_close()


def notify_job(tmp_path: Path, receivers: Receivers) -> Path:
    spec = job_folder(tmp_path)
    targets = "".join(f"  - {{{where}, format: {fmt}, on: {EVENTS}}}\n" for where, fmt in (
        (f"url: '{receivers.url('json')}'", "json"), ("url_env: WECOM_HOOK", "wecom"),
        (f"url: '{receivers.url('down')}'", "json"), (f"url: '{receivers.url('silent')}'", "json")))
    spec.write_text(
        "name: told\nregion: ap-guangzhou\ninstance: {type: GN7.2XLARGE32}\nbilling: {mode: spot}\n"
        f"train:\n  command: {tiny_command(10, 0.05, 5, held(5))}\n"
        f"notify:\n{targets}snapshot: {{enabled: false}}\nlimits: {{max_runtime: 20m}}\n")
    return spec


def test_each_event_reaches_each_receiver_once_across_a_killed_controller(
        cli: Cli, tmp_path: Path, receivers: Receivers) -> None:
    cli.extra_env["WECOM_HOOK"] = receivers.url("wecom") + "?key=robot-token"
    watch = JobWatch(cli.emulator)
    first = cli.start("run", str(notify_job(tmp_path, receivers)))
    try:
        (instance,) = watch.running(attempt=1)
        watch.wait_for_step(attempt=1, step=4)
    finally:
        first.kill()
        first.wait()
    cli.emulator.admin.reclaim(instance["instance_id"], None)  # no notice: the next controller finds it gone
    cli.extra_env["CVMJOB_CRASH_AT"] = "RUNNING->RECOVERING"
    crashed = cli.start("resume", watch.job_id)
    assert finish(crashed, cli) != 0  # killed right after recording the move and its notifications
    del cli.extra_env["CVMJOB_CRASH_AT"]
    resuming = cli.start("resume", watch.job_id)
    try:
        watch.running(attempt=2, timeout=180)
        release(cli.emulator.admin, watch.job_id)
    finally:
        code = finish(resuming, cli)
    exited = time.time()
    assert code == 0, cli.output()[-3000:]

    job = watch.job_id
    expected = [f"{job}/reclaimed/1", f"{job}/succeeded/2"]
    assert [b["id"] for b in receivers.got["json"]] == expected  # each once, in order, across the three processes
    assert [b["event"] for b in receivers.got["json"]] == ["reclaimed", "succeeded"]
    succeeded = receivers.got["json"][1]
    assert succeeded["schema"] == "cvmjob.notification/v1"
    assert succeeded["job"]["state"] == "SUCCEEDED" and succeeded["job"]["exit_code"] == 0  # type: ignore[index]
    wecom = receivers.got["wecom"]
    assert [m["msgtype"] for m in wecom] == ["markdown", "markdown"], wecom
    assert "told succeeded" in wecom[1]["markdown"]["content"]  # type: ignore[index]
    # The 500 and the silent receiver were tried and held nothing up: the last controller left within the
    # sender's flush (3 s) of the job's end, their notifications pending for the store's next controller.
    assert receivers.got.get("down") and receivers.got.get("silent")
    final = cli.status(job)
    assert exited - final["updated_at"] < 10, (exited, final["updated_at"])
    told = {(n["target"], n["event"]): n for n in final["notifications"]}
    assert told[("json to " + receivers.url("json"), "succeeded")]["state"] == "sent"
    assert told[("wecom to $WECOM_HOOK", "reclaimed")]["state"] == "sent"
    down = told[("json to " + receivers.url("down"), "reclaimed")]
    assert down["state"] == "pending" and down["tries"] >= 1 and down["last_error"] == "HTTP 500: ok", down
    text = cli.run("status", job, timeout=60).stdout
    assert f"notify: reclaimed json to {receivers.url('down')}: pending after" in text, text
    assert "robot-token" not in cli.output() and "robot-token" not in (cli.home / "state.db").read_bytes().decode(
        "latin-1")
