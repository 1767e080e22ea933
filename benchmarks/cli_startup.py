"""CLI start-up: the CPU time (user + system, of the process and its children) of cvmjob's quickest commands, next
to the interpreter doing nothing, in one run.

    python benchmarks/cli_startup.py [--runs N] [--cvmjob PATH]

Each command runs --runs times (default 9) after one untimed run, in turn with the others (so a drift of the
machine reaches them all); the median and the spread are shown, and the CPU time above ``python -c pass``. The
commands: ``--help``, ``--version``, ``plan --help``, and ``status`` on an empty CVMJOB_HOME (which opens the store,
finds no job and exits 2: "no jobs yet"). Issue 31's bound: ``cvmjob --help`` at most 0.3 s of CPU on the
development machine. The package's bytecode should be compiled first (``make test`` does; where
PYTHONDONTWRITEBYTECODE is set, every run would compile what changed). The last line is exactly
``cli_startup: python=X help=Y version=Z plan_help=W status=V`` (medians, seconds of CPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def cpu_seconds(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """The command's user + system CPU time (it and every process it waited for) and its exit status."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs of each command")
    parser.add_argument("--cvmjob", type=Path, default=Path(sys.executable).parent / "cvmjob",
                        help="the cvmjob entry point (default: beside this interpreter)")
    args = parser.parse_args()
    python = str(Path(args.cvmjob).parent / "python")
    python = python if Path(python).exists() else sys.executable
    cvmjob = str(args.cvmjob)
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CVMJOB_", "TENCENTCLOUD_"))}
        env["CVMJOB_HOME"] = home
        commands = {
            "python": ([python, "-c", "pass"], 0),
            "help": ([cvmjob, "--help"], 0),
            "version": ([cvmjob, "--version"], 0),
            "plan_help": ([cvmjob, "plan", "--help"], 0),
            "status": ([cvmjob, "status"], 2),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.runs + 1):
            for name, (argv, expected) in commands.items():
                seconds, code = cpu_seconds(argv, env)
                if code != expected:
                    sys.exit(f"{' '.join(argv)} exited {code}, not {expected}")
                if round_:  # the first round warms the page cache
                    times[name].append(seconds)
    base = statistics.median(times["python"])
    print(f"{'command':<28} {'CPU s (median)':>14} {'min':>6} {'max':>6} {'above python':>13}")
    for name, (argv, _) in commands.items():
        shown = " ".join(["python" if name == "python" else "cvmjob", *argv[1:]])
        median = statistics.median(times[name])
        print(f"{shown:<28} {median:>14.3f} {min(times[name]):>6.3f} {max(times[name]):>6.3f} "
              f"{median - base:>13.3f}")
    print("cli_startup: " + " ".join(f"{name}={statistics.median(t):.3f}" for name, t in times.items()))


if __name__ == "__main__":
    main()
