"""The lean install: a fresh virtualenv with `pip install .` (no extras), its size, and that it drives the quickstart
against an emulator started from another environment (this checkout's .venv, which has the `emulator` extra).

    python benchmarks/lean_install.py [--venv DIR] [--reuse] [--steps N] [--python python3]

Steps: make the virtualenv and ``pip install`` this checkout into it (not editable: what a user gets; the index is
pip's own configuration, PyPI by default); its size as ``du`` counts it (pip and setuptools of the virtualenv
included) and its biggest installed distributions; which extras' modules it lacks (it should lack them all); then,
with the emulator of ``.venv/bin/cvmjob emulator serve`` on a free port and ``CVMJOB_ENDPOINT`` and its keys set
(as tests/e2e/conftest.py sets them), the lean ``cvmjob emulator seed`` puts the quickstart's data in place and the
lean ``cvmjob run jobs/quickstart/job.yaml`` runs it with ``--steps N`` (default 12) steps: the whole life cycle
(instance, data sync, 2-process DDP on the emulated instance, checkpoints, image, teardown). The instances are the
emulator's, so their Python (and torch) is the emulator's environment's. Issue 31's bound: under 150 MB. Not part
of the test suite (it downloads and installs a virtualenv). The last line is exactly
``lean_install: size_mb=X install_s=Y run_exit=Z state=S``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "jobs" / "quickstart"
QUICKSTART_DATA = "cos://cvmjob-examples-1250000000/quickstart/"
# What each extra brings that the core must not: the module whose absence is that extra's one-line error.
EXTRAS_MODULES = {"sweep": ["optuna", "cmaes", "scipy"], "report": ["plotly", "matplotlib"], "postgres": ["psycopg"],
                  "emulator": ["jwt"], "train": ["torch", "numpy"]}


def say(line: str) -> None:
    print(line, flush=True)


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def biggest(venv: Path, count: int = 8) -> list[tuple[str, float]]:
    site = next(venv.glob("lib/python3*/site-packages"))
    sizes = [(p.name, du_mb(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith((".dist-info",
                                                                                                "__pycache__"))]
    return sorted(sizes, key=lambda s: -s[1])[:count]


def install(venv: Path, python: str) -> float:
    started = time.monotonic()
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:  # pip's output only then: its warnings about the index are noise otherwise
        sys.exit(f"pip install failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.monotonic() - started


def clean_env() -> dict[str, str]:
    """This machine's environment without cvmjob's, Tencent's, CI's or a proxy's variables."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CVMJOB_", "TENCENTCLOUD_")) and k != "CI" and "proxy" not in k.lower()}


def serve(work: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """The emulator of this checkout's .venv, on a free port; its ready document with the key read in."""
    ready = work / "ready.json"
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "cvmjob"), "emulator", "serve", "--port", "0", "--state-dir",
         str(work / "state"), "--ready-file", str(ready), "--seed-root", str(ROOT)],
        env=clean_env(), stdout=(work / "emulator.log").open("wb"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the emulator did not start: {(work / 'emulator.log').read_text()[-2000:]}")
        time.sleep(0.2)
    info = json.loads(ready.read_text())
    info["secret_key"] = Path(info["secret_key_file"]).read_text().strip()
    return server, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, help="where to make the virtualenv (default: a temporary directory)")
    parser.add_argument("--reuse", action="store_true", help="use --venv as it is if it exists (no install)")
    parser.add_argument("--steps", type=int, default=12, help="the quickstart's training steps")
    parser.add_argument("--python", default="python3", help="the interpreter that makes the virtualenv")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lean-install-"))
    venv = args.venv or work / "venv"
    try:
        install_s = 0.0
        if not (args.reuse and (venv / "bin" / "cvmjob").exists()):
            say(f"installing {ROOT} into a fresh virtualenv at {venv} (no extras)")
            install_s = install(venv, args.python)
        size = du_mb(venv)
        say(f"virtualenv: {size:.0f} MB (du), installed in {install_s:.0f} s")
        say("biggest: " + ", ".join(f"{name} {mb:.1f} MB" for name, mb in biggest(venv)))
        probe = ("import importlib.util as u, json, sys; "
                 "print(json.dumps([m for m in sys.argv[1:] if u.find_spec(m) is not None]))")
        modules = [m for ms in EXTRAS_MODULES.values() for m in ms]
        present = json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", probe, *modules],
                                            capture_output=True, text=True, check=True).stdout)
        say(f"extras' modules present: {present or 'none'}")
        server, info = serve(work)
        try:
            env = clean_env() | {"CVMJOB_HOME": str(work / "home"), "CVMJOB_ENDPOINT": info["endpoint"],
                                 "TENCENTCLOUD_SECRET_ID": info["secret_id"],
                                 "TENCENTCLOUD_SECRET_KEY": info["secret_key"], "PYTHONUNBUFFERED": "1"}
            lean = str(venv / "bin" / "cvmjob")
            seeded = subprocess.run([lean, "emulator", "seed", str(QUICKSTART / "dataset"), QUICKSTART_DATA],
                                    env=env, capture_output=True, text=True, check=False, cwd=ROOT)
            say(f"lean `cvmjob emulator seed`: exit {seeded.returncode}: {(seeded.stdout + seeded.stderr).strip()}")
            started = time.monotonic()
            run = subprocess.run([lean, "run", str(QUICKSTART / "job.yaml"), "--set",
                                  f"train.command=python train.py --steps {args.steps}"],
                                 env=env, capture_output=True, text=True, check=False, cwd=ROOT)
            say(f"lean `cvmjob run jobs/quickstart/job.yaml`: exit {run.returncode} in "
                f"{time.monotonic() - started:.0f} s; its output:")
            for line in (run.stdout + run.stderr).strip().splitlines():
                say(f"  | {line}")
            status = subprocess.run([lean, "status", "-o", "json"], env=env, capture_output=True, text=True,
                                    check=False, cwd=ROOT)
            state = json.loads(status.stdout)["state"] if status.returncode == 0 else "unknown"
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        say(f"lean_install: size_mb={size:.0f} install_s={install_s:.0f} run_exit={run.returncode} state={state}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
