"""A SQLite store that cvmjob cannot read (a damaged page, a file that is not SQLite): every command that needs it
says so in one line, naming the file and the way out, and the file is left byte for byte as it was (issue 27,
item 10). Through the real CLI; no cloud is needed to reach the store."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_BAD_INPUT
from orchestrator.state.store import Store
from tests.emulator_process import clean_env
from tests.records import new_job

REPO = Path(__file__).resolve().parents[2]
JOBS = 50  # a few pages of jobs, so that a damaged page of them is not the whole table
COMMANDS = (
    ("ls",),
    ("status",),
    ("status", "job-00000007"),
    ("cancel", "job-00000007"),
    ("cost",),
    ("controller", "status"),
    ("controller", "--exit-when-idle"),
)


def a_store(path: Path) -> None:
    store = Store(path)
    try:
        for n in range(JOBS):
            store.create_job(new_job(f"job-{n:08d}", f"job{n}", source_dir="/src/" + "x" * 1000), now=100.0 + n)
    finally:
        store.close()


def garbage_over_the_jobs_root_page(path: Path) -> None:
    """0xA5 over every byte of the page the jobs table starts at: what a torn write or a bad sector leaves."""
    db = sqlite3.connect(path)
    try:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
    finally:
        db.close()
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)


def not_sqlite(path: Path) -> None:
    path.write_bytes(b"jobs: [this is somebody's YAML, not a SQLite database]\n" * 100)


@pytest.mark.parametrize("damage", [garbage_over_the_jobs_root_page, not_sqlite], ids=["damaged-page", "not-sqlite"])
def test_every_command_says_the_store_is_damaged_in_one_line_and_leaves_it_as_it_is(
        tmp_path: Path, damage: Callable[[Path], None]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = home / "state.db"
    a_store(path)
    damage(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    env = {**clean_env(), "CVMJOB_HOME": str(home), "CVMJOB_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("CVMJOB_DB", None)
    for command in COMMANDS:
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *command], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=120, check=False)
        said = done.stderr.strip().splitlines()
        assert done.returncode == EXIT_BAD_INPUT, (command, done.returncode, done.stdout, done.stderr)
        assert len(said) == 1 and "Traceback" not in done.stderr, (command, done.stderr)
        assert said[0].startswith(f"error: the store {path} is damaged"), (command, said)
        assert "backup" in said[0] and "move it aside" in said[0], (command, said)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before, command
        # No store beside it either (a new one, a renamed one), and no write waiting in its journal.
        assert [p.name for p in home.iterdir() if p.name.startswith("state") and p.suffix == ".db"] == ["state.db"]
        assert not [p.name for p in home.iterdir() if p.name.startswith("state.db-") and p.stat().st_size > 0
                    and not p.name.endswith("-shm")], command
