"""Where the suite's CPU goes: ``python -m tests.cpu_profile [COMMAND...]`` (default ``bash .ci/run``).

The suite is CPU-bound on CI's two cores (user + system time over twice the wall is above 90 %), so its wall time
falls only with the CPU it spends, and most of that is spent by processes pytest never times: the CLI, the
controllers, the agents, the emulators, torchrun. This runs COMMAND under the kernel's process accounting (root
and Debian's ``acct`` package: ``accton``, ``dump-acct``), which records every process's CPU time as it exits, while
a thread notes each live process's command line and parent, and pytest (loaded with ``-p tests.cpu_profile``
through PYTEST_ADDOPTS) writes when each test started and ended on which worker. It then prints the CPU by kind of
process, and by test file and test: a process counts for the test its xdist worker was running when it started.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

TIMELINE_ENV = "CVMJOB_CPU_TIMELINE"
FAULT_SUITE = "tests/faults/"
REPO = Path(__file__).resolve().parents[1]
_KINDS = (  # (in the command line, kind), first match wins
    ("orchestrator.agent.install", "agent installer"),
    ("orchestrator.agent", "agent"),
    ("orchestrator.emulator", "emulator"),
    ("tests.faults.submit", "fault-suite controller (submit, then resume)"),
    ("tests.faults.many", "fault-suite many jobs"),
    ("exec(eval(sys.stdin.readline()))", "pytest-xdist worker (tests in process)"),
    ("torch", "torch"),
    ("podman", "podman"),
    ("zipfile -e agent.whl", "bootstrap: unzip the agent"),
    ("urllib.request.urlretrieve", "bootstrap: fetch"),
    ("tiny.py", "training: tiny.py"),
    ("postgres", "postgres"),
    ("pip", "pip"),
    ("mypy", "mypy"),
)
_CLI = re.compile(r"(?:orchestrator\.cli\.main|bin/cvmjob) (\w+)")


@dataclass(frozen=True)
class Exited:
    """One process as the accounting file has it: its name, CPU seconds, pid, parent and start (epoch s)."""

    comm: str
    cpu: float
    pid: int
    ppid: int
    started: float


def parse_accounting(text: str) -> list[Exited]:
    """``dump-acct``'s lines (v3 records: command|version|utime|stime|etime|uid|gid|mem|io|pid|ppid|...|start),
    times in the kernel's AHZ ticks (100 a second)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 12 or cells[1] != "v3":
            continue
        started = datetime.strptime(cells[-1], "%a %b %d %H:%M:%S %Y").timestamp()
        out.append(Exited(cells[0], (float(cells[2]) + float(cells[3])) / 100, int(cells[9]), int(cells[10]), started))
    return out


def kind(comm: str, cmdline: str | None) -> str:
    if cmdline is None:
        return f"{comm} (too short to be seen)"
    found = _CLI.search(cmdline)
    if found:
        return f"cvmjob {found.group(1)}"
    return next((name for text, name in _KINDS if text in cmdline), comm)


@dataclass(frozen=True)
class Span:
    worker_pid: int
    test: str
    start: float
    end: float


def running_at(spans: list[Span], worker_pid: int, started: float) -> str:
    """The test ``worker_pid`` was running at ``started`` (a second's slack: accounting keeps whole seconds), or
    the last one it had started, or "(before the first test)"."""
    mine = [s for s in spans if s.worker_pid == worker_pid and s.start - 1 <= started]
    inside = [s for s in mine if started <= s.end + 1]
    if inside:
        return inside[-1].test
    return max(mine, key=lambda s: s.start).test if mine else "(before the first test)"


def attribute(exited: list[Exited], seen_parents: dict[int, int], spans: list[Span]) -> dict[str, float]:
    """CPU seconds by test: each process counts for the test its nearest xdist-worker ancestor was running (the
    fault suite's scenarios run in a pool, out of its tests' order: they count as one). ``seen_parents``: the
    parents the watcher saw, which outlive a process reparented to init when its own parent exited."""
    parents = {p.pid: p.ppid for p in exited} | seen_parents
    workers = {s.worker_pid for s in spans}
    by_test: dict[str, float] = collections.defaultdict(float)
    for process in exited:
        pid = process.pid
        for _ in range(64):  # a cycle of reused pids ends here
            if pid in workers or pid <= 1:
                break
            pid = parents.get(pid, 0)
        if process.pid in workers:
            where = "(pytest-xdist workers: the tests that run in process)"
        else:
            where = running_at(spans, pid, process.started) if pid in workers else "(outside pytest)"
        by_test[FAULT_SUITE if where.startswith(FAULT_SUITE) else where] += process.cpu
    return by_test


# -- the pytest plugin (-p tests.cpu_profile) ---------------------------------------------------------------------


def _note(event: str, nodeid: str) -> None:
    path = os.environ.get(TIMELINE_ENV)
    if path and os.environ.get("PYTEST_XDIST_WORKER") is not None:
        with open(path, "a") as timeline:
            timeline.write(json.dumps({"event": event, "test": nodeid, "t": time.time(), "pid": os.getpid()}) + "\n")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _note("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _note("end", nodeid)


def read_timeline(path: Path) -> list[Span]:
    started: dict[tuple[int, str], float] = {}
    spans = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        key = (event["pid"], event["test"])
        if event["event"] == "start":
            started[key] = event["t"]
        elif key in started:
            spans.append(Span(event["pid"], event["test"], started.pop(key), event["t"]))
    return spans


# -- the run ------------------------------------------------------------------------------------------------------


class _Watcher(threading.Thread):
    """Each live process's command line and parent, looked at twice a second."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cmdlines: dict[tuple[int, int], str] = {}  # (pid, start in whole seconds since the epoch)
        self.parents: dict[int, int] = {}
        self.stop = threading.Event()
        self._boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                          if line.startswith("btime"))

    def run(self) -> None:
        while not self.stop.wait(0.5):
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        stat = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
                        key = (int(entry.name), self._boot + int(stat[19]) // 100)
                        if key not in self.cmdlines:
                            raw = Path(f"/proc/{entry.name}/cmdline").read_bytes()
                            self.cmdlines[key] = raw.replace(b"\0", b" ").decode(errors="replace")[:300]
                            self.parents[key[0]] = int(stat[1])
                    except (OSError, IndexError, ValueError):
                        continue  # gone between the listing and the read

    def cmdline(self, process: Exited) -> str | None:
        for slack in (0, -1, 1, -2, 2):
            found = self.cmdlines.get((process.pid, int(process.started) + slack))
            if found is not None:
                return found
        return None


def _table(title: str, rows: dict[str, float], total: float, top: int) -> None:
    print(f"\n{title}")
    for name, cpu in sorted(rows.items(), key=lambda r: -r[1])[:top]:
        print(f"  {cpu:8.0f} s  {100 * cpu / total:5.1f} %  {name}")


def main() -> None:
    command = sys.argv[1:] or ["bash", ".ci/run"]
    work = Path(tempfile.mkdtemp(prefix="cvmjob-cpu-"))
    accounting, timeline = work / "pacct", work / "timeline.jsonl"
    accounting.touch()
    timeline.touch()
    subprocess.run(["accton", str(accounting)], check=True)
    watcher = _Watcher()
    watcher.start()
    began = time.monotonic()
    env = dict(os.environ, PYTEST_ADDOPTS=f"{os.environ.get('PYTEST_ADDOPTS', '')} -p tests.cpu_profile".strip())
    env[TIMELINE_ENV] = str(timeline)
    # -p imports the plugin before pytest puts the checkout on sys.path
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    try:
        code = subprocess.run(command, env=env, check=False).returncode
    finally:
        subprocess.run(["accton", "off"], check=True)
        watcher.stop.set()
    wall = time.monotonic() - began
    exited = parse_accounting(subprocess.run(["dump-acct", str(accounting)], capture_output=True, text=True,
                                             check=True).stdout)
    total = sum(p.cpu for p in exited)
    by_kind: dict[str, float] = collections.defaultdict(float)
    for process in exited:
        by_kind[kind(process.comm, watcher.cmdline(process))] += process.cpu
    by_test = attribute(exited, watcher.parents, read_timeline(timeline))
    by_file: dict[str, float] = collections.defaultdict(float)
    for test, cpu in by_test.items():
        by_file[test.split("::")[0]] += cpu
    cores = os.cpu_count() or 1
    share = 100 * total / wall / cores
    print(f"\n{' '.join(command)} exited {code}: wall {wall:.0f} s, CPU {total:.0f} s ({share:.0f} % of {cores} cores)"
          f", {len(exited)} processes; the records are in {work}")
    _table("CPU by kind of process", by_kind, total, 25)
    _table("CPU by test file", by_file, total, 25)
    _table("CPU by test", by_test, total, 25)
    sys.exit(code)


if __name__ == "__main__":
    main()
