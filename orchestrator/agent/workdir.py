"""The job's workdir on the instance: the archive from the bundle, extracted safely, then the setup commands.

The archive is extracted once per ETag (a restarted agent finds it in place). Every member must stay inside
the workdir: an absolute path, a '..' segment, a link pointing outside, or a device file refuses the whole
archive. Setup commands run with bash in the workdir, one after the other, output into the node's log; they
run again when the agent restarts (after a reboot, say), so they must be idempotent, as ``pip install`` is.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.contract import Outcome
from orchestrator.providers.tencent.storage import ObjectStore

from .errors import AttemptEnded
from .paths import NodePaths, stays_inside, write_atomically
from .processes import run_to_end
from .retry import retrying
from .stop import StopSignal

log = logging.getLogger(__name__)


class UnsafeArchive(Exception):
    pass


def check_members(members: Sequence[tarfile.TarInfo]) -> None:
    """Raise UnsafeArchive naming the first member that could write outside the extraction folder."""
    for member in members:
        if not stays_inside(member.name):
            raise UnsafeArchive(f"{member.name!r} points outside the workdir")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(member.name), member.linkname))
        if member.issym() and not stays_inside(target):
            raise UnsafeArchive(f"symlink {member.name!r} -> {member.linkname!r} points outside the workdir")
        if member.islnk() and not stays_inside(member.linkname):
            raise UnsafeArchive(f"hard link {member.name!r} -> {member.linkname!r} points outside the workdir")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise UnsafeArchive(f"{member.name!r} is a device, FIFO or other special file")


def extract(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.extracting")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        check_members(members)
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12+/3.11.4+: the same rules, enforced again by tarfile
            tar.extractall(tmp, members=members, filter="data")
        else:
            tar.extractall(tmp, members=members)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def prepare_workdir(paths: NodePaths, store: ObjectStore, archive_key: str | None) -> None:
    """Make paths.workdir hold the archive's files (an empty folder when the job has no archive)."""
    if archive_key is None:
        paths.workdir.mkdir(parents=True, exist_ok=True)
        return
    info = retrying("workdir archive", lambda: store.head(archive_key))
    if info is None:
        raise AttemptEnded(Outcome.SETUP_FAILED, f"the workdir archive cos://{store.bucket}/{archive_key} is missing")
    if paths.workdir.is_dir() and paths.archive_marker.exists() and paths.archive_marker.read_text() == info.etag:
        log.info("workdir already extracted (archive %s)", info.etag)
        return
    retrying("workdir archive", lambda: store.download_file(archive_key, paths.archive))
    try:
        extract(paths.archive, paths.workdir)
    except (UnsafeArchive, tarfile.TarError) as exc:
        raise AttemptEnded(Outcome.SETUP_FAILED, f"workdir archive refused: {exc}") from exc
    write_atomically(paths.archive_marker, info.etag.encode())
    paths.archive.unlink()
    log.info("workdir extracted into %s", paths.workdir)


def run_setup(commands: Sequence[str], cwd: Path, env: Mapping[str, str], log_path: Path, stop: StopSignal,
              mirror: str | None = None) -> None:
    """``mirror``: the only package index the instance reaches (it has no public IP), named when a command failed
    for want of the network."""
    for number, command in enumerate(commands, 1):
        log.info("setup %d/%d: %s", number, len(commands), command)
        start = log_path.stat().st_size if log_path.exists() else 0
        code = run_to_end(["bash", "-c", command], cwd, env, log_path, stop)
        if code is None:
            stop.check()
        if code != 0:
            why = f"setup command {number} ({command!r}) exited with {code}"
            if mirror is not None and _unreachable(log_path, start):
                why += (f": it could not reach the network, and this instance has no public IP, so it reaches only "
                        f"Tencent's mirror {mirror} (pip uses it unless told another index) and same-region COS. "
                        "install from the mirror, or give the instances network.public_ip")
            raise AttemptEnded(Outcome.SETUP_FAILED, why, exit_code=code)


# What pip, curl, wget and git print when a host cannot be reached (directly or through a proxy).
_UNREACHABLE = re.compile(r"ProxyError|Tunnel connection failed|Failed to establish a new connection|Network is "
                          r"unreachable|Temporary failure in name resolution|Could not resolve host|Connection "
                          r"refused|Connection timed out|Could not fetch URL|unable to access|Unable to establish")


def _unreachable(log_path: Path, start: int) -> bool:
    """Whether the output a command appended to the log (from ``start``, its last 64 KiB) says a host was out of
    reach."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(start, log_path.stat().st_size - 65536))
            said = f.read().decode(errors="replace")
    except OSError:
        return False
    return _UNREACHABLE.search(said) is not None
