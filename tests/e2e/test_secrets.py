"""`cvmjob run --secret` (issue 31): the value, set in the submitting shell only, reaches the training of every
attempt (a spot reclaim's next one too, launched by `cvmjob resume` in another process whose environment lacks it)
and is nowhere else: no row of the store, no COS object but the job's secrets.json (deleted when the job ends), no
CLI output, log or fingerprint. The training never prints it: it prints whether its SHA-256 is the expected one."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from pathlib import Path

import pytest

from orchestrator.contract import FINGERPRINTS_PREFIX, JobLayout
from orchestrator.errors import EXIT_BAD_INPUT
from tests.e2e.conftest import Cli, cos_keys
from tests.e2e.spot_support import STATE_BUCKET, JobWatch, job_folder, tiny_command
from tests.e2e.test_run import no_instance_left
from tests.e2e.test_spot import finish
from tests.emulator.conftest import make_cos
from tests.holding import held, release
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

CHECK = """\
import hashlib, os
value = os.environ.get("WANDB_API_KEY", "")
matches = hashlib.sha256(value.encode()).hexdigest() == os.environ["EXPECTED_SHA256"]
print(f"attempt {os.environ['CVMJOB_ATTEMPT']}: the secret matches: {matches}", flush=True)
"""


def secret_job(tmp_path: Path, value: str) -> Path:
    """A spot job whose training checks the secret, then trains (tiny.py) held at step 5 until released; its setup
    says whether it sees the secret (it must not)."""
    spec = job_folder(tmp_path)
    (spec.parent / "check.py").write_text(CHECK)
    expected = hashlib.sha256(value.encode()).hexdigest()
    spec.write_text(
        "name: secret\nregion: ap-guangzhou\ninstance: {type: GN7.2XLARGE32}\nbilling: {mode: spot}\n"
        "setup: ['echo setup sees WANDB_API_KEY=${WANDB_API_KEY:-nothing}']\n"
        f"train:\n  command: python3 check.py && {tiny_command(10, 0.05, 10, held(5))}\n"
        f"  env: {{EXPECTED_SHA256: '{expected}'}}\n"
        "snapshot: {enabled: false}\nlimits: {max_runtime: 20m}\n")
    return spec


def test_a_secret_reaches_every_attempts_training_and_is_written_nowhere_else(cli: Cli, tmp_path: Path) -> None:
    value = "wandb-" + secrets.token_hex(16)
    cli.extra_env["WANDB_API_KEY"] = value  # the submitting shell's alone: not the emulator's, not the spec's
    watch = JobWatch(cli.emulator)
    process = cli.start("run", str(secret_job(tmp_path, value)), "--secret", "WANDB_API_KEY", "--if-changed")
    try:
        (first,) = watch.running(attempt=1)
        wait_until("attempt 1 to check its secret", lambda: "the secret matches" in watch.log(1), 180)
        assert on_disk(cli, value) == []
        process.kill()  # the controller that submitted dies: the next attempt is another process's to launch
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    cli.emulator.admin.reclaim(first["instance_id"], None)  # a spot reclaim without notice
    del cli.extra_env["WANDB_API_KEY"]
    resuming = cli.start("resume", watch.job_id)
    try:
        watch.running(attempt=2, timeout=180)
        wait_until("attempt 2 to check its secret", lambda: "the secret matches" in watch.log(2), 180)
        assert on_disk(cli, value) == []
        release(cli.emulator.admin, watch.job_id)
    finally:
        code = finish(resuming, cli)
    job_id = watch.job_id
    status = cli.run("status", job_id, "--output", "json", timeout=60)
    final = json.loads(status.stdout)
    assert code == 0 and final["state"] == "SUCCEEDED" and final["attempt"] == 2, cli.output()[-3000:]

    shown = [cli.output(), status.stdout, status.stderr]
    for attempt in (1, 2):
        log = cli.run("logs", job_id, "--attempt", str(attempt), timeout=60)
        assert log.returncode == 0, log.stderr
        assert f"attempt {attempt}: the secret matches: True" in log.stdout, log.stdout[-2000:]
        assert "setup sees WANDB_API_KEY=nothing" in log.stdout  # the training's alone
        shown += [log.stdout, log.stderr]
    assert not [text for text in shown if value in text]
    assert no_instance_left(cli)

    # The one object that holds it, and every other one that does not.
    cos = make_cos(cli.emulator)
    layout = JobLayout(job_id)

    def read(key: str) -> bytes:
        data: bytes = cos.get_object(Bucket=STATE_BUCKET, Key=key)["Body"].get_raw_stream().read()
        return data

    assert json.loads(read(layout.spec))["secrets"] == ["WANDB_API_KEY"]  # the name is kept, for the agents
    state_keys = cos_keys(cli.emulator, STATE_BUCKET)
    assert layout.secrets not in state_keys  # its one copy went when the job ended
    assert any(k.startswith(FINGERPRINTS_PREFIX) for k in state_keys)  # the fingerprint's entry is among them
    assert layout.agent_config(2, 0) in state_keys and layout.job_doc in state_keys
    for bucket in [b["Name"] for b in cos.list_buckets()["Buckets"]["Bucket"]]:
        for key in cos_keys(cli.emulator, bucket):
            body = cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read()
            assert value.encode() not in body, f"cos://{bucket}/{key}"

    # The store: its files' bytes, and every row of every table.
    files = [p for p in cli.home.rglob("*") if p.is_file()]
    assert any(p.name == "state.db" for p in files)
    assert not [p for p in files if value.encode() in p.read_bytes()]
    with sqlite3.connect(cli.home / "state.db") as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert {"jobs", "nodes", "events"} <= set(tables)
        rows = [row for table in tables for row in db.execute(f'SELECT * FROM "{table}"')]
        (fingerprint,) = db.execute("SELECT fingerprint_json FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    assert fingerprint and not [row for row in rows if value in repr(row)]
    assert value.encode() not in (cli.emulator.state_dir / "state.json").read_bytes()  # nor the emulator's records


def on_disk(cli: Cli, value: str) -> list[Path]:
    """The files of the running instances (their agents' config, keys and logs, the workdir, the training's log)
    that hold ``value``; asserts there are files to look at."""
    files = [p for p in (cli.emulator.state_dir / "instances").rglob("*") if p.is_file()]
    assert any(p.name == "agent.json" for p in files), files[:20]
    return [p for p in files if value.encode() in p.read_bytes()]


def test_a_secret_not_set_is_one_line_and_nothing_is_created(cli: Cli, tmp_path: Path) -> None:
    spec = secret_job(tmp_path, "unused")
    result = cli.run("run", str(spec), "--secret", "WANDB_API_KEY", timeout=120)
    assert result.returncode == EXIT_BAD_INPUT, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "secrets: WANDB_API_KEY is not set (or empty) in this environment" in line
    assert "export WANDB_API_KEY=<value>" in line
    assert json.loads(cli.run("ls", "--output", "json").stdout or "[]") == []
    assert not cli.emulator.admin.calls(action="RunInstances")
