"""Every script of benchmarks/ at its smallest size (benchmarks/README.md, "Smallest sizes"): it runs its whole path
end to end, against the emulator where it uses one, exits 0 and ends with its summary line. The numbers are not
judged (a busy machine moves them all); a script that no longer runs is what these catch."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres import server_bindir

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
TIMEOUT = 540  # under pytest's 600 s: a hung script fails with its output rather than the whole run's timeout
NUMBER = r"[0-9]+(?:\.[0-9]+)?"

pytestmark = [pytest.mark.slow, pytest.mark.benchmark]
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (the train extra)")


def run(script: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    """The script under this interpreter with warnings as errors; its stdout's lines, once it exited 0."""
    done = subprocess.run([sys.executable, "-W", "error", str(BENCHMARKS / script), *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-6000:]
    return lines


def assert_last_line(lines: list[str], pattern: str) -> re.Match[str]:
    found = re.fullmatch(pattern, lines[-1].strip())
    assert found is not None, "\n".join(lines[-30:])
    return found


def without_nginx() -> list[str]:
    """``--no-nginx`` unless an nginx that can take PUTs is installed (the scripts' ceiling; `make test` does not
    install it): where it is, the smallest run measures it too."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        return ["--no-nginx"]
    version = subprocess.run([nginx, "-V"], capture_output=True, text=True, check=False).stderr
    return [] if "--with-http_dav_module" in version else ["--no-nginx"]


@needs_torch
def test_bench_vs_plain() -> None:
    lines = run("bench_vs_plain.py", "--cpu", "--rounds", "1")
    assert_last_line(lines, rf"bench_vs_plain: plain={NUMBER} workload={NUMBER} command={NUMBER} ratio={NUMBER} "
                            rf"command_ratio={NUMBER}")


def test_cli_startup() -> None:
    lines = run("cli_startup.py", "--runs", "1")
    assert_last_line(lines, rf"cli_startup: python={NUMBER} help={NUMBER} version={NUMBER} plan_help={NUMBER} "
                            rf"status={NUMBER} agent={NUMBER}")


@needs_torch
def test_checkpoint_stall(tmp_path: Path) -> None:
    lines = run("checkpoint_stall.py", "--cpu", "--rounds", "1", "--interval", "5", "--directory", str(tmp_path))
    summary = assert_last_line(lines, rf"checkpoint_stall: mode=cpu images_per_s_none=(?P<none>{NUMBER}) "
                                      rf"images_per_s_every5=(?P<every>{NUMBER}) slowdown_pct=(?P<slowdown>-?{NUMBER})")
    none, every = float(summary["none"]), float(summary["every"])
    assert none > 0 and every > 0
    # The rates are printed to 0.05: at a few images/s (a loaded CI machine) that moves the slowdown by points.
    bounds = [100 * (n - e) / n for n in (none - 0.05, none + 0.05) for e in (every - 0.05, every + 0.05)]
    assert min(bounds) - 0.01 <= float(summary["slowdown"]) <= max(bounds) + 0.01, summary
    table = "\n".join(lines)
    for way in ("none", "every 5, async (default)", "every 5, sync (async_save=False)"):
        assert re.search(rf"^{re.escape(way)} +[0-9.]+", table, re.MULTILINE), table
    assert list(tmp_path.iterdir()) == []  # its checkpoints went with it


def test_controller_scale() -> None:
    lines = run("controller_scale.py", "--jobs", "1", "--baseline-jobs", "1", "--reclaims", "1",
                "--train-seconds", "6", "--heartbeat", "1")
    assert_last_line(lines, rf"controller_scale: jobs=1 rss_mb={NUMBER} mb_per_job={NUMBER} describe_per_s={NUMBER} "
                            rf"throttled=[0-9]+ reclaim_detect_p95_s={NUMBER} launch_p95_s={NUMBER}")


@pytest.mark.postgres
def test_controller_takeover() -> None:
    if server_bindir() is None:
        message = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run `make postgres`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    lines = run("controller_takeover.py", "--jobs", "2", "--lease", "5", "--reclaims", "1", "--train-seconds", "10",
                "--heartbeat", "1")
    assert_last_line(lines, rf"controller_takeover: jobs=2 succeeded=2 takeover_s={NUMBER} goal_s={NUMBER} "
                            r"max_instances_per_node=1")


def test_cos_throughput() -> None:
    lines = run("cos_throughput.py", "--size-mib", "64", "--small", "100", "--repeat", "1", *without_nginx())
    assert_last_line(lines, rf"GET 100 x 4 KiB objects +{NUMBER} +(?:{NUMBER}|-) +obj/s +(?:{NUMBER}|-)")


def test_gpu_e2e_in_its_cpu_mode(tmp_path: Path) -> None:
    # The script runs `python3`: this interpreter's (its folder first on PATH), as the other scripts run under it.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "OUT": str(tmp_path)}
    done = subprocess.run(["bash", str(BENCHMARKS / "gpu_e2e.sh"), "--cpu", "2"], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-6000:]
    lines = done.stdout.strip().splitlines()
    assert_last_line(lines, "cvmjob run exited 0")
    assert re.search(r"^world=2 device=cpu ", done.stdout, re.MULTILINE), done.stdout[-4000:]


def test_gpu_e2e_refuses_what_is_not_a_step_count(tmp_path: Path) -> None:
    for args in (["--cpu", "x"], ["0"], ["3", "4"]):
        done = subprocess.run(["bash", str(BENCHMARKS / "gpu_e2e.sh"), *args], capture_output=True, text=True,
                              timeout=60, check=False, cwd=ROOT, env={**os.environ, "OUT": str(tmp_path)})
        assert done.returncode == 2 and done.stderr.startswith("usage: "), (args, done.stderr)


@needs_torch
def test_notice_to_checkpoint() -> None:
    lines = run("notice_to_checkpoint.py", "--cpu", "--reclaims", "1", "--after-steps", "2")
    assert_last_line(lines, rf"notice_to_checkpoint: mode=cpu reclaims=1 median_s={NUMBER} max_s={NUMBER} "
                            rf"checkpoint_mb={NUMBER}")


@needs_torch
def test_recovery() -> None:
    lines = run("recovery.py", "--reclaims", "2", "--work", "1", "--notice", "5")
    assert_last_line(lines, rf"steps lost without notice \(1\) +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}  steps")


def test_sync_throughput() -> None:
    lines = run("sync_throughput.py", "--small", "20", "--small-kib", "4", "--large-mib", "32", "--repeat", "1",
                "--skip-coscmd", *without_nginx())
    assert_last_line(lines, rf"sync_throughput: (?:\w+={NUMBER} )+cvmjob_rss_mb={NUMBER}")
