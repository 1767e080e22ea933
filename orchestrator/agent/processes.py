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

from .paths import write_atomically
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
    """Processes known by (pid, start time): a root and whatever descends from the known ones."""

    def __init__(self, known: dict[int, int]) -> None:
        self.known = dict(known)

    @classmethod
    def of(cls, root_pid: int) -> ProcessTree:
        return cls({root_pid: process_table().get(root_pid, (0, -1, ""))[1]})

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

    def record(self) -> str:
        """"<pid> <start time>" per line: what kill_recorded() needs to find these processes again."""
        return "".join(f"{pid} {start}\n" for pid, start in sorted(self.known.items()))


class Launched:
    """A child process, stdout and stderr appended to ``log_path``. With ``record``, every process of its tree
    is written there as it appears: if the agent dies (SIGKILL, a crash), the next agent finds and stops them
    all, torchrun's workers included, even once torchrun itself is gone."""

    def __init__(self, args: Sequence[str], cwd: Path, env: Mapping[str, str], log_path: Path,
                 record: Path | None = None) -> None:
        with log_path.open("ab") as out:
            self.popen = subprocess.Popen(list(args), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=subprocess.STDOUT)
        self.tree = ProcessTree.of(self.popen.pid)
        self._record = record
        self._recorded = 0
        self._write_record()

    def _write_record(self) -> None:
        if self._record is not None and len(self.tree.known) != self._recorded:
            write_atomically(self._record, self.tree.record().encode())
            self._recorded = len(self.tree.known)

    def poll(self) -> int | None:
        code = self.popen.poll()
        self.tree.refresh()
        self._write_record()
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
    """Stop the processes of a record (``ProcessTree.record``) that are still those processes, and their
    descendants; True if any was alive."""
    known = dict((int(pid), int(start)) for pid, start in (line.split() for line in record.splitlines() if line))
    tree = ProcessTree(known)
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
