from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from orchestrator.agent.processes import Launched, ProcessTree, kill_recorded, run_to_end
from orchestrator.agent.stop import StopRequest, StopSignal

# A parent that starts a child in a session of its own (as torchrun starts its workers) and records its pid.
SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(60)
"""


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_stop_reaches_grandchildren_in_other_sessions_even_after_their_parent_is_gone(tmp_path: Path) -> None:
    process = Launched([sys.executable, "-c", SPAWNER, str(tmp_path / "child.pid")], tmp_path, dict(os.environ),
                       tmp_path / "run.log")
    child = int(wait_for_file(tmp_path / "child.pid"))
    assert process.poll() is None and child in process.tree.known
    os.kill(process.popen.pid, signal.SIGKILL)  # the parent dies without a word: the child is reparented
    process.popen.wait()
    assert alive(child)
    process.stop(grace=2)
    assert not alive(child)


def test_a_crashed_agents_training_is_found_again_by_its_record(tmp_path: Path) -> None:
    process = Launched([sys.executable, "-c", SPAWNER, str(tmp_path / "child.pid")], tmp_path, dict(os.environ),
                       tmp_path / "run.log", record=tmp_path / "training.pid")
    child = int(wait_for_file(tmp_path / "child.pid"))
    process.poll()
    record = (tmp_path / "training.pid").read_text()
    assert str(child) in record and str(process.popen.pid) in record
    os.kill(process.popen.pid, signal.SIGKILL)  # the parent is gone before the next agent looks
    process.popen.wait()
    assert kill_recorded(record, grace=2)
    assert not alive(child)
    assert not kill_recorded(record)  # gone: nothing to do, and a recycled pid would not match its start time


def test_the_tree_never_adopts_unrelated_processes(tmp_path: Path) -> None:
    tree = ProcessTree.of(os.getpid())
    table = tree.refresh()
    # Everything it took in descends from this process in the table it read. (Not "is alive": this suite's
    # emulators run instances whose processes end at any moment, and one ending after the read made this flaky.)
    assert all(table[pid][0] in tree.known for pid in tree.known if pid != os.getpid())
    assert os.getppid() not in tree.known


def test_run_to_end_returns_the_exit_code_or_none_when_stopped(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    assert run_to_end(["bash", "-c", "echo hi; exit 3"], tmp_path, {"PATH": "/usr/bin:/bin"}, log, StopSignal()) == 3
    assert log.read_text() == "hi\n"
    stop = StopSignal()
    stop.request(StopRequest("cancel", "test", deadline=time.monotonic() + 60))
    started = time.monotonic()
    assert run_to_end(["sleep", "30"], tmp_path, {"PATH": "/usr/bin:/bin"}, log, stop) is None
    assert time.monotonic() - started < 10
