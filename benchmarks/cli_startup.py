"""CLI start-up: the CPU time (user + system, of the process and its children) of cvmjob's quickest commands and of
the agent's import, next to the interpreter doing nothing, in one run; with ``--baseline REV``, next to the same in a
checkout of REV too.

    python benchmarks/cli_startup.py [--runs N] [--cvmjob PATH] [--baseline REV]

Each command runs --runs times (default 9) after one untimed run, in turn with the others (so a drift of the
machine reaches them all); the median and the spread are shown, and the CPU time above ``python -c pass``. The
commands: ``--help``, ``--version``, ``plan --help``, and ``status`` on an empty CVMJOB_HOME (which opens the store,
finds no job and exits 2: "no jobs yet"), and ``import orchestrator.agent.__main__`` (what every agent process pays
before it starts). Issue 31's bound: ``cvmjob --help`` at most 0.3 s of CPU on the
development machine. The package's bytecode should be compiled first (``make test`` does; where
PYTHONDONTWRITEBYTECODE is set, every run would compile what changed). The last line is exactly
``cli_startup: python=X help=Y version=Z plan_help=W status=V agent=A`` (medians, seconds of CPU).

``--baseline REV``: REV is checked out in a temporary git worktree, and every command runs from both trees in turn
(as ``python -m orchestrator.cli.main``, with the tree first on PYTHONPATH, the same virtualenv); a table shows the
two medians side by side, then the last line as above, of this tree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_seconds(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """The command's user + system CPU time (it and every process it waited for) and its exit status."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, process.returncode


@contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A temporary worktree of ``rev``, its package's bytecode compiled (as ``make test`` compiles this tree's)."""
    with tempfile.TemporaryDirectory(prefix="cli-startup-base-") as parent:
        tree = Path(parent) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            subprocess.run([sys.executable, "-m", "compileall", "-q", "orchestrator"], cwd=tree, check=True,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
            yield tree
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


def measure(commands: dict[str, tuple[list[str], int, dict[str, str]]], runs: int) -> dict[str, list[float]]:
    """Each command ``runs`` times after one untimed round, all in turn."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, (argv, expected, env) in commands.items():
            seconds, code = cpu_seconds(argv, env)
            if code != expected:
                sys.exit(f"{' '.join(argv)} exited {code}, not {expected}")
            if round_:  # the first round warms the page cache
                times[name].append(seconds)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs of each command")
    parser.add_argument("--cvmjob", type=Path, default=Path(sys.executable).parent / "cvmjob",
                        help="the cvmjob entry point (default: beside this interpreter)")
    parser.add_argument("--baseline", help="a git revision to measure beside this tree (e.g. HEAD~1)")
    args = parser.parse_args()
    python = str(Path(args.cvmjob).parent / "python")
    python = python if Path(python).exists() else sys.executable
    cvmjob = str(args.cvmjob)
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CVMJOB_", "TENCENTCLOUD_"))}
        env["CVMJOB_HOME"] = home
        env["PYTHONDONTWRITEBYTECODE"] = ""  # the first run of a tree writes what it compiles
        commands = {
            "python": ([python, "-c", "pass"], 0),
            "help": ([cvmjob, "--help"], 0),
            "version": ([cvmjob, "--version"], 0),
            "plan_help": ([cvmjob, "plan", "--help"], 0),
            "status": ([cvmjob, "status"], 2),
            "agent": ([python, "-c", "import orchestrator.agent.__main__"], 0),
        }
        if args.baseline:
            with checkout(args.baseline) as tree:
                both = {}
                for label, root in (("this", REPO), ("base", tree)):
                    tree_env = {**env, "PYTHONPATH": str(root)}
                    for name, (argv, expected) in commands.items():
                        module = [python, "-m", "orchestrator.cli.main", *argv[1:]] if argv[0] == cvmjob else argv
                        both[f"{label}:{name}"] = (module, expected, tree_env)
                times = measure(both, args.runs)
            print(f"{'command':<28} {args.baseline + ' (s)':>14} {'this tree (s)':>14}")
            for name in commands:
                print(f"{name:<28} {statistics.median(times['base:' + name]):>14.3f} "
                      f"{statistics.median(times['this:' + name]):>14.3f}")
            print("cli_startup: " + " ".join(f"{name}={statistics.median(times['this:' + name]):.3f}"
                                             for name in commands))
            return
        times = measure({name: (argv, expected, env) for name, (argv, expected) in commands.items()}, args.runs)
    base = statistics.median(times["python"])
    print(f"{'command':<28} {'CPU s (median)':>14} {'min':>6} {'max':>6} {'above python':>13}")
    for name, (argv, _) in commands.items():
        shown = " ".join(["cvmjob" if argv[0] == cvmjob else "python", *argv[1:]])
        median = statistics.median(times[name])
        print(f"{shown:<28} {median:>14.3f} {min(times[name]):>6.3f} {max(times[name]):>6.3f} "
              f"{median - base:>13.3f}")
    print("cli_startup: " + " ".join(f"{name}={statistics.median(t):.3f}" for name, t in times.items()))


if __name__ == "__main__":
    main()
