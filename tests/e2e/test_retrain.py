"""CI retraining (issue 12) through the CLI: `cvmjob run --if-changed` from runners that keep nothing between runs
(a fresh CVMJOB_HOME each) finds the job that succeeded on the same inputs in the state bucket and reuses it; one
changed data object, script line or spec field trains again. A job is followed (status, logs) and cancelled from
a machine that never had it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from qcloud_cos.cos_exception import CosServiceError

from orchestrator.errors import EXIT_GATE_FAILED
from tests.e2e.conftest import QUICKSTART_DATA, Cli, cos_keys
from tests.e2e.spot_support import job_folder, tiny_command
from tests.emulator.conftest import make_cos
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# tiny.py, not the quickstart's DDP: the subject is which inputs make a job new. 20 s of training, so that the
# retrains started below are still running when they are cancelled from another machine.
SHORT = ("--set", f"train.command={tiny_command(20, 1.0, 5, '--val-offset 0.5 --eval-every 5')}",
         "--set", "snapshot.enabled=false")


def runner(cli: Cli, name: str, **env: str) -> Cli:
    """Another CI runner: the same cloud and keys, nothing local in common; ``env``: its CI's variables."""
    return Cli(cli.emulator, cli.home.parent / name, extra_env=env)


def run_if_changed(cli: Cli, spec: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli.run("run", str(spec), "--if-changed", "--output", "json", *SHORT, *extra, timeout=300)
    assert result.stdout.strip(), result.stderr[-3000:]
    view: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, view


def launches(cli: Cli) -> int:
    """Instances the account ever had (the call log would count the plan's DryRun of RunInstances too)."""
    return len(cli.emulator.admin.instances())


def test_a_second_runner_reuses_the_job_that_trained_on_the_same_inputs(cli: Cli, tmp_path: Path) -> None:
    spec = job_folder(tmp_path)
    summaries = [tmp_path / "summary-1.md", tmp_path / "summary-2.md"]
    one = runner(cli, "runner-1", GITHUB_REF_NAME="main", GITHUB_STEP_SUMMARY=str(summaries[0]))
    code, first = run_if_changed(one, spec, "--summary", "markdown", "--gate", "val_loss<=5")
    assert code == 0 and first["state"] == "SUCCEEDED", first.get("reason")
    assert first["up_to_date"] is False and "val_loss" in first["result"]["metrics"]
    told = summaries[0].read_text()
    assert "| `val_loss` | 0.5" in told and "**No baseline:** the first successful run of quickstart" in told, told
    assert "✅ `val_loss<=5`" in told

    # Reused from a fresh runner, whose gate the reused job misses: exit 5, and the summary says both.
    before = launches(cli)
    started = time.monotonic()
    two = runner(cli, "runner-2", GITHUB_REF_NAME="feature", GITHUB_STEP_SUMMARY=str(summaries[1]))
    code, second = run_if_changed(two, spec, "--summary", "markdown", "--gate", "val_loss<=0.0001")
    took = time.monotonic() - started
    assert code == EXIT_GATE_FAILED and second["up_to_date"] is True, second
    told = summaries[1].read_text()
    assert "Training was skipped" in told and "❌ `val_loss<=0.0001`" in told, told
    assert f"**Baseline:** job `{first['job_id']}`" not in told  # the baseline would be the reused job itself
    assert (second["job_id"], second["fingerprint"]) == (first["job_id"], first["fingerprint"])
    assert second["metrics"] == first["result"]["metrics"]
    assert second["outputs"] == f"cos://cvmjob-ap-guangzhou-{cli.emulator.appid}/cvmjob/{first['job_id']}/outputs/"
    # No instance is what proves it trained nothing: its time is the machine's (47 s once, beside a CI run).
    print(f"up to date in {took:.1f} s")
    assert launches(cli) == before, (took, launches(cli) - before)

    # Seen from a machine that never had it: status and logs come from the state bucket.
    elsewhere = runner(cli, "elsewhere")
    seen = elsewhere.status(first["job_id"])
    assert (seen["state"], seen["cost_cny"], [p["state"] for p in seen["phases"]]) == (
        "SUCCEEDED", first["cost_cny"], [p["state"] for p in first["phases"]])
    assert [n["instance_id"] for n in seen["nodes"]] == [n["instance_id"] for n in first["nodes"]]
    logs = elsewhere.run("logs", first["job_id"], timeout=60)
    assert logs.returncode == 0 and "step=19 " in logs.stdout, logs.stderr
    assert not (elsewhere.home / "state.db").exists() or elsewhere.run("ls").stdout.count("job-") == 0

    # One input changed at a time: each run is a new job, detached, and cancelled at once (it only has to start)
    # from a machine that does not hold it: through a signal in the state bucket to the controller that does.
    again = runner(cli, "runner-3")

    def retrains(what: str, *extra: str) -> None:
        code, view = run_if_changed(again, spec, "--detach", *extra)
        assert code == 0 and view["up_to_date"] is False and view["job_id"] != first["job_id"], (what, view)
        cancelled = elsewhere.run("cancel", view["job_id"], "--no-checkpoint", "--wait", timeout=180)
        assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout, (what, cancelled.stdout,
                                                                                cancelled.stderr)
        assert again.status(view["job_id"])["state"] == "CANCELLED"

    retrains("a spec field", "--set", "checkpoints.keep_last=2")
    script = spec.parent / "tiny.py"
    script.write_text(script.read_text() + "\n# one line more\n")
    retrains("a line of the script")
    make_cos(cli.emulator).put_object(Bucket=QUICKSTART_DATA.bucket, Key=f"{QUICKSTART_DATA.prefix}extra.txt",
                                      Body=b"one more object")
    retrains("a data object")


def test_a_second_runner_with_the_same_inputs_follows_the_first_and_reuses_its_result(cli: Cli, tmp_path: Path) -> None:
    # Both trained (issue 27, item 11): the first claims the inputs in the state bucket, the second follows its job.
    spec = job_folder(tmp_path)
    one, two = runner(cli, "runner-1"), runner(cli, "runner-2")
    first = one.start("run", str(spec), "--if-changed", *SHORT)
    try:
        wait_until("the first runner's claim", lambda: claims(cli) or None, 120)
        second = two.run("run", str(spec), "--if-changed", "--output", "json", *SHORT, timeout=300)
        assert first.wait(120) == 0, one.output()[-3000:]
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 0, second.stderr[-3000:]
    view = json.loads(second.stdout)
    assert view["up_to_date"] is True and view["job_id"] in one.output(), (view, one.output()[-2000:])
    assert f"job {view['job_id']} is training on these inputs (another runner)" in second.stderr, second.stderr
    assert launches(cli) == 1  # one training, not two


def claims(cli: Cli) -> list[str]:
    """The claims in the state bucket's fingerprint index (none while the first job has not made the bucket)."""
    try:
        keys = cos_keys(cli.emulator, f"cvmjob-ap-guangzhou-{cli.emulator.appid}", "cvmjob/_fingerprints/")
    except CosServiceError as exc:
        assert exc.get_error_code() == "NoSuchBucket", exc
        return []
    return [k for k in keys if k.endswith(".claim.json")]
