"""An instance's processes: one process group per boot, signalled as a whole, every member reaped.

A boot starts its script as the leader of a new session (``start_new_session=True``), so everything the script
starts shares its process group unless it starts a session of its own: torchrun does, for each worker. A real
power-off takes those too, so an instance's processes are its group *and* every process whose environment carries
the instance's marker (its ``TENCENTCLOUD_EMULATOR_ROOT``, inherited by every descendant). Powering an instance
off (terminate, stop, reclaim, emulator shutdown) signals all of them: SIGTERM, then SIGKILL once a grace period
has passed.

Reaping: the emulator makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux). A daemon left
behind by an instance's script is then re-parented to the emulator instead of PID 1, which in containers often
never reaps, and the emulator reaps the zombies of its instance groups. It reaps members of instance groups only,
never other children, so it cannot steal an exit status that someone else's ``Popen.wait`` expects; and the
orphans it adopted that lead a session of their own (a container runtime's monitor, conmon, which a runtime CLI
waits on until its pid is gone: a zombie would hang it), which no one here started.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
# After SIGKILL a group is normally gone within milliseconds; this only bounds a wait on an unkillable process.
SIGKILL_WAIT_SECONDS = 5.0


def become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def group_members(pgids: Iterable[int]) -> dict[int, list[tuple[int, str]]]:
    """(pid, state letter) of every process in the given process groups, from /proc/<pid>/stat."""
    wanted = set(pgids)
    found: dict[int, list[tuple[int, str]]] = {pgid: [] for pgid in wanted}
    if not wanted:
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # the process exited while we looked
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) in wanted:
            found[int(fields[2])].append((int(entry.name), fields[0]))
    return found


def reap_orphans(leaders: Iterable[int]) -> None:
    """Reap zombie children of this process that lead a session other than ours and are no boot's leader: orphans
    re-parented here (the emulator's own children share its session, or are the leaders, reaped by Popen)."""
    ours, own_session, skip = os.getpid(), os.getsid(0), set(leaders)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp session ...
        if len(fields) >= 4 and fields[0] == "Z" and int(fields[1]) == ours and int(fields[3]) != own_session:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry.name), os.WNOHANG)


def marked_pids(marker: bytes) -> list[int]:
    """Live processes whose environment holds ``marker`` (zombies have an empty environ and never match)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environment = Path(entry.path, "environ").read_bytes()
        except OSError:  # exited while we looked, or not ours to read
            continue
        if marker in environment.split(b"\0"):
            found.append(int(entry.name))
    return found


class ProcessGroup:
    """One boot of one instance: the leader's Popen, the group it leads, and the marker its processes carry."""

    def __init__(self, popen: subprocess.Popen[bytes], marker: bytes) -> None:
        self.popen = popen
        self.marker = marker
        self.pgid = popen.pid  # a session leader's pid is its process group id
        self._killer: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def killing(self) -> bool:
        return self._killer is not None

    def powering_off(self) -> bool:
        """The power-off has begun and not finished (its thread still waits out the grace or the SIGKILL)."""
        return self._killer is not None and self._killer.is_alive()

    def reap(self, members: list[tuple[int, str]] | None = None) -> bool:
        """Reap the group's zombies; True while some member still lives."""
        self.popen.poll()
        if members is None:
            members = group_members([self.pgid])[self.pgid]
        live = False
        for pid, state in members:
            if state != "Z":
                live = True
            elif pid != self.popen.pid:  # the leader is reaped by Popen.poll above, keeping its status
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        return live

    def alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            self.popen.poll()
            return bool(marked_pids(self.marker))  # members that left the group (own sessions)
        except PermissionError:  # the group id was reused by someone else's process: ours are gone
            return bool(marked_pids(self.marker))
        return self.reap() or bool(marked_pids(self.marker))

    def kill(self, grace: float) -> None:
        """Power off in the background: SIGTERM, SIGKILL after ``grace`` seconds (0: at once). Idempotent."""
        with self._lock:
            if self._killer is None:
                self._killer = threading.Thread(
                    target=self._kill, args=(grace,), name=f"kill-{self.pgid}", daemon=True
                )
                self._killer.start()

    def join(self, timeout: float | None = None) -> None:
        if self._killer is not None:
            self._killer.join(timeout)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
        for pid in marked_pids(self.marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _wait_dead(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def _kill(self, grace: float) -> None:
        if grace > 0:
            self._signal(signal.SIGTERM)
            if self._wait_dead(grace):
                return
        self._signal(signal.SIGKILL)
        self._wait_dead(SIGKILL_WAIT_SECONDS)


def reap_groups(groups: Iterable[ProcessGroup]) -> None:
    """Reap zombies left in live instances (a daemon that exited after its parent), in one pass over /proc."""
    by_pgid = {g.pgid: g for g in groups}
    for pgid, members in group_members(by_pgid).items():
        by_pgid[pgid].reap(members)
