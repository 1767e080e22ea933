"""What a person sees of `cvmjob run`: on a terminal the confirmation of the estimate, the live panel (step N of M,
cost so far) with the training's own output streamed above it, and the answer at the end; with `-o json` the
events as JSON lines on stderr and one document on stdout, valid against docs/schemas/run.json."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import REPO, Cli
from tests.e2e.spot_support import job_folder, tiny_command

pytestmark = pytest.mark.e2e

STEPS = 40
# Long enough for several of the panel's refreshes and the log shipper's chunks (every few seconds).
TRAIN = ("--set", f"train.command={tiny_command(STEPS, 0.25, 20, '--val-offset 0.5 --eval-every 10')}",
         "--set", "snapshot.enabled=false")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


def in_terminal(argv: list[str], env: dict[str, str], answer: str, timeout: float) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr; type ``answer`` at the first question
    (a line ending in ``[y/N]: ``). Its exit code and everything it wrote, escape sequences removed."""
    main, child = pty.openpty()
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env, cwd=REPO, close_fds=True)
    os.close(child)
    seen, answered, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # the child closed the terminal: it has ended
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and b"[y/N]: " in seen:
                os.write(main, answer.encode() + b"\n")
                answered = True
            if process.poll() is not None and not ready:
                break
        else:
            process.kill()
            raise AssertionError(f"still running after {timeout} s:\n{ANSI.sub('', seen.decode(errors='replace'))}")
        code = process.wait(timeout=30)
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
    return code, ANSI.sub("", seen.decode(errors="replace"))


def test_a_run_in_a_terminal_asks_shows_its_progress_and_ends_with_the_answer(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    env = {**cli.env(), "TERM": "xterm-256color", "COLUMNS": "110", "LINES": "40"}
    code, seen = in_terminal(cli.argv("run", str(spec), *TRAIN), env, "y", timeout=400)
    assert code == 0, seen[-4000:]
    (tmp_path / "seen.txt").write_text(seen)
    # The question, with the estimate it asks about.
    assert re.search(r"estimate: 1 x \S+ in ap-guangzhou-\d \(on-demand\) at ¥[\d.,]+/h each; at most ",
                     seen), seen[:3000]
    assert re.search(r"start \S+\? \[y/N\]: ", seen), seen[:3000]
    # The live panel: step N of M with its share, the cost so far.
    assert re.search(rf"step \d+/{STEPS} \(\d+%\)", seen), seen[-4000:]
    assert "cost so far" in seen
    # The training's own output, streamed from its shipped log.
    assert re.search(r"step=\d+ loss=0\.\d+", seen), seen[-4000:]
    # The answer: metrics, where the outputs are, the time, and what to do next.
    tail = seen[seen.rindex(": SUCCEEDED"):]
    assert re.search(r"metrics +val_loss=0\.5\d*", tail), tail
    assert re.search(r"outputs +cos://\S+/outputs/", tail), tail
    assert "cvmjob download job-" in tail and "next:" in tail


def test_a_no_at_the_question_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    before = cli.emulator.admin.instances(processes=False)
    code, seen = in_terminal(cli.argv("run", str(job_folder(tmp_path)), *TRAIN), cli.env(), "n", timeout=120)
    assert code == 130, seen
    assert "not started: nothing was created" in seen
    assert cli.emulator.admin.instances(processes=False) == before
    assert json.loads(cli.run("ls", "--output", "json").stdout) == []  # no job either


def test_json_output_has_events_on_stderr_and_one_document_valid_against_the_schema(cli: Cli,
                                                                                    tmp_path: Path) -> None:
    ran = cli.run("run", str(job_folder(tmp_path)), *TRAIN, "--output", "json", timeout=400)
    assert ran.returncode == 0, ran.stderr[-4000:]
    events = [json.loads(line) for line in ran.stderr.splitlines()]  # every line is one JSON event
    assert events[0]["event"] == "estimate"
    steps = [e["step"] for e in events if e.get("event") == "progress" and e["step"] is not None]
    assert steps and all(e.get("total_steps") == STEPS for e in events if e.get("event") == "progress" and e["step"])
    assert any(e.get("event") == "state" for e in events), events
    document = json.loads(ran.stdout)
    schema = json.loads((REPO / "docs" / "schemas" / "run.json").read_text())
    jsonschema.validate(document, schema)
    assert document["up_to_date"] is False and document["state"] == "SUCCEEDED"
    assert document["metrics"]["val_loss"] == pytest.approx(0.5 + 1 / STEPS)

    # What it made, downloaded: the outputs, then again (nothing fetched twice), and the complete checkpoints.
    job_id, to = document["job_id"], tmp_path / "got"
    fetched = json.loads(cli.run("download", job_id, "outputs", "--to", str(to / "out"), "-o", "json").stdout)
    assert (fetched["fetched"], fetched["already_there"]) == (1, 0), fetched
    assert (to / "out" / "done.txt").read_text() == f"{STEPS}\n"
    again = json.loads(cli.run("download", job_id, "outputs", "--to", str(to / "out"), "-o", "json").stdout)
    assert (again["fetched"], again["already_there"], again["bytes"]) == (0, 1, 0), again
    checkpoints = cli.run("download", job_id, "checkpoints", "--to", str(to / "ckpt"))
    assert checkpoints.returncode == 0, checkpoints.stderr
    steps = sorted(p.name for p in (to / "ckpt").iterdir() if not p.name.startswith("."))
    assert steps == [c["name"] for c in document["checkpoints"]], steps
    assert json.loads((to / "ckpt" / steps[-1] / "state.json").read_text()) == {"step": STEPS - 1}
