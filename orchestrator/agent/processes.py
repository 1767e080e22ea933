"""The agent's child processes (setup commands, the training): output appended to the node's log, stopped
together with everything they started.

They stay in the agent's process group, so that whatever powers the instance off (a shutdown, the emulator's
terminate) reaches them as it reaches the agent. That group is not enough to stop them, though: torchrun starts
every worker in a session of its own, and when torchrun dies its workers are reparented. So the tree under a
launched process is recorded as it grows (from /proc, each pid with its start time, so that a recycled pid is
never signalled) and a signal goes to every recorded process that is still alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .stop import StopSignal

_POLL_SECONDS = 0.2


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time in clock ticks, state letter) for every process we can read."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path("/proc", name, "stat").read_text()
        except OSError:
            continue  # it exited while we looked
        # "pid (comm) state ppid ... starttime(22nd)": comm may contain spaces and parentheses.
        fields = text[text.rindex(")") + 2 :].split()
        table[int(name)] = (int(fields[1]), int(fields[19]), fields[0])
    return table


class ProcessTree:
    def __init__(self, root_pid: int, root_start: int | None = None) -> None:
        if root_start is None:
            root_start = process_table().get(root_pid, (0, -1, ""))[1]
        self.root = (root_pid, root_start)
        self.known: dict[int, int] = {root_pid: root_start}

    def refresh(self) -> dict[int, tuple[int, int, str]]:
        """Record the live descendants of the recorded processes; returns the table it read."""
        table = process_table()
        added = True
        while added:
            added = False
            for pid, (ppid, start, _) in table.items():
                if pid not in self.known and self._same(ppid, table):
                    self.known[pid] = start
                    added = True
        return table

    def _same(self, pid: int, table: dict[int, tuple[int, int, str]]) -> bool:
        entry = table.get(pid)
        return entry is not None and pid in self.known and entry[1] == self.known[pid] and entry[2] != "Z"

    def alive(self) -> list[int]:
        table = self.refresh()
        return [pid for pid in self.known if self._same(pid, table)]

    def signal(self, sig: int) -> None:
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError):  # it exited since we looked
                os.kill(pid, sig)


class Launched:
    """A child process, stdout and stderr appended to ``log_path``."""

    def __init__(self, args: Sequence[str], cwd: Path, env: Mapping[str, str], log_path: Path) -> None:
        with log_path.open("ab") as out:
            self.popen = subprocess.Popen(list(args), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=subprocess.STDOUT)
        self.tree = ProcessTree(self.popen.pid)

    @property
    def pid_record(self) -> str:
        """"<pid> <start time>": what kill_recorded() needs to find this process again after an agent crash."""
        return f"{self.tree.root[0]} {self.tree.root[1]}"

    def poll(self) -> int | None:
        code = self.popen.poll()
        self.tree.refresh()
        return code

    def signal_all(self, sig: int) -> None:
        self.tree.signal(sig)

    def stop(self, grace: float) -> int:
        """SIGTERM to the whole tree, SIGKILL to whatever is left after ``grace`` seconds; the exit code."""
        stop_tree(self.tree, grace)
        return self.popen.wait()


def stop_tree(tree: ProcessTree, grace: float) -> None:
    tree.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    tree.signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)


def kill_recorded(record: str, grace: float = 10.0) -> bool:
    """Stop the tree of a process recorded by ``Launched.pid_record`` if it is still that process (the
    training of an agent that crashed); True if there was one."""
    pid, start = (int(v) for v in record.split())
    tree = ProcessTree(pid, start)
    if not tree.alive():
        return False
    stop_tree(tree, grace)
    return True


def run_to_end(args: Sequence[str], cwd: Path, env: Mapping[str, str], log_path: Path,
               stop: StopSignal) -> int | None:
    """Run a command to its end; None if a stop request ended it first."""
    process = Launched(args, cwd, env, log_path)
    while (code := process.poll()) is None:
        if stop.event.wait(_POLL_SECONDS * 2):
            process.stop(grace=10)
            return None
    return code
