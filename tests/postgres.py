"""A throwaway PostgreSQL cluster for the tests, from Debian's ``postgresql`` package (``make postgres``).

The cluster lives in a temporary folder, listens on 127.0.0.1 only (a free port; its unix socket in that folder)
and trusts local connections; it is removed at the end of the session. The server refuses to run as root, so as
root it runs as the system user ``cvmjob-pg``, created when missing. Without PostgreSQL the tests that need it
skip, except under CI (CI=true), where they fail: CI installs it.

``store_url`` gives a test the URL of an empty store on each backend: a SQLite file and a fresh PostgreSQL
database (the second marked ``postgres``)."""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

SERVER_USER = "cvmjob-pg"
_databases = itertools.count()


def server_bindir() -> Path | None:
    """The newest installed server's bin folder."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Cluster:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.as_user: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="cvmjob-pg-"))
        if os.geteuid() == 0:
            _ensure_user(SERVER_USER)
            account = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", SERVER_USER, "--"]
        self.data = self.root / "data"
        self.port = 0

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}{tail}")

    def start(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--locale=C", "--no-sync")
        for attempt in range(3):  # another process may take the free port before the server binds it
            self.port = _free_port()
            try:
                self.serve_again()
                return
            except RuntimeError:
                if attempt == 2:
                    raise

    def serve_again(self) -> None:
        """Start the server (again, after ``halt``) on its port."""
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200"
                   " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")

    def halt(self) -> None:
        """An outage: the server shuts down (a clean shutdown: every commit it acknowledged is kept), its data
        stays for ``serve_again``."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True, timeout=60, check=False)
        if made.returncode != 0:  # another pytest-xdist worker may have made it meanwhile (useradd: exit 9)
            try:
                pwd.getpwnam(name)
            except KeyError:
                raise RuntimeError(f"useradd {name} failed ({made.returncode}): {made.stderr}") from None


@contextmanager
def running_cluster() -> Iterator[Cluster]:
    """A throwaway cluster, started, and stopped and removed after; the test skips (fails under CI) without
    PostgreSQL's server binaries."""
    bindir = server_bindir()
    if bindir is None:
        message = "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run `make postgres`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    cluster = Cluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of the cluster's ``postgres`` database (superuser ``postgres``, no password)."""
    with running_cluster() as cluster:
        yield cluster.url


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """The URL of a new, empty database of the cluster, dropped afterwards (with any connection left to it)."""
    name = f"cvmjob_test_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store on each backend: a SQLite file's path, a PostgreSQL database's URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "state.db")
    else:
        with fresh_database(request.getfixturevalue("postgres_url")) as url:
            yield url
