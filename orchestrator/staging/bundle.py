"""What the controller ships to an instance: the workdir archive and the agent wheel.

The archive honours ``.gitignore`` files (the root one and nested ones, git's matching rules via pathspec) and
never includes ``.git``; it is deterministic (sorted members, fixed mtimes and owners), so an unchanged workdir
gives the same digest. The agent wheel is built from this very installation of cvmjob, so the agent on the
instance is always the controller's version (no PyPI round trip, works offline).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import io
import os
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pathspec

import crc64ecma

from .. import __version__
from ..errors import CvmjobError

_ALWAYS_EXCLUDED = {".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".venv"}
# The agent needs neither the local cloud nor the CLI.
_NOT_IN_AGENT_WHEEL = {"emulator", "cli"}


@dataclass(frozen=True)
class Archive:
    path: Path
    files: int
    size: int
    sha256: str


def workdir_files(root: Path, exclude: tuple[Path, ...] = ()) -> list[Path]:
    """Files under ``root`` that git would not ignore, as paths relative to root, sorted. Directories in
    ``exclude`` (cvmjob's own home, say, when it lies inside the workdir) are skipped whole."""
    out: list[Path] = []
    excluded = {p.resolve() for p in exclude}
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        ignore_file = here / ".gitignore"
        if ignore_file.is_file():
            specs.append((rel_dir, pathspec.GitIgnoreSpec.from_lines(ignore_file.read_text().splitlines())))

        def ignored(rel: Path, is_dir: bool) -> bool:
            for base, spec in specs:
                if base == Path(".") or base in rel.parents:
                    candidate = str(rel.relative_to(base) if base != Path(".") else rel)
                    if spec.match_file(candidate + ("/" if is_dir else "")):
                        return True
            return False

        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in _ALWAYS_EXCLUDED
            and (here / d).resolve() not in excluded
            and not ignored(rel_dir / d, is_dir=True)
        )
        out.extend(rel_dir / f for f in sorted(filenames) if not ignored(rel_dir / f, is_dir=False))
    return sorted(p for p in out if (root / p).is_file() and not (root / p).is_symlink())


class BundleError(CvmjobError):
    """The workdir archive could not be made (a full disk, a quota, a file that cannot be read): one sentence
    naming the file and the cause, what a job's STAGING fails with."""


def workdir_archive(root: Path, dest: Path, exclude: tuple[Path, ...] = ()) -> Archive:
    """The archive of ``root`` at ``dest``; BundleError when it cannot be read or written, the partial archive
    removed (it was left behind, and the OSError escaped as a traceback)."""
    files = workdir_files(root, exclude)
    try:
        size = _write_archive(root, files, dest)
        return Archive(dest, len(files), size, _sha256(dest))
    except OSError as exc:
        _remove_partial(dest)
        if exc.filename is not None and Path(exc.filename) != dest and Path(exc.filename).is_relative_to(root):
            raise BundleError(f"cannot read {exc.filename} of the workdir for its archive: {exc.strerror}") from exc
        raise BundleError(f"cannot write the workdir archive {dest}: {exc.strerror or exc} "
                          f"({_free_space(dest.parent)})") from exc


def _write_archive(root: Path, files: list[Path], dest: Path) -> int:
    size = 0
    # mtime=0 in the gzip header and fixed member metadata: same tree, same bytes.
    with (
        dest.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for rel in files:
            path = root / rel
            info = tarfile.TarInfo(str(rel))
            stat = path.stat()
            info.size = stat.st_size
            info.mode = 0o755 if stat.st_mode & 0o111 else 0o644
            info.mtime = 0
            with path.open("rb") as f:
                tar.addfile(info, f)
            size += stat.st_size
    return size


def _remove_partial(dest: Path) -> None:
    # Only a regular file is ours to remove: a destination such as /dev/full is not a partial archive.
    if dest.is_file() and not dest.is_symlink():
        dest.unlink()


def _free_space(folder: Path) -> str:
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return f"free space in {folder} unknown"
    return f"{usage.free / 1e6:.1f} MB free in {folder}"


@dataclass(frozen=True)
class Wheel:
    name: str  # its file name, as pip wants it
    data: bytes
    sha256: str


@functools.cache
def agent_wheel() -> Wheel:
    """A pure-Python wheel of this installation's packages: ``orchestrator`` (minus the emulator and the CLI) and
    ``crc64ecma``, the checksum arithmetic it shares with the emulator. Built once a process: a controller stages
    every job with the same wheel (building it for each took a quarter of a busy controller's CPU)."""
    data = _agent_wheel_bytes()
    return Wheel(f"cvmjob-{__version__}-py3-none-any.whl", data, hashlib.sha256(data).hexdigest())


def _agent_wheel_bytes() -> bytes:
    dist_info = f"cvmjob-{__version__}.dist-info"
    records: list[str] = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as whl:
        for package_root in (Path(__file__).resolve().parents[1], Path(crc64ecma.__file__).resolve().parent):
            for path in sorted(package_root.rglob("*")):
                rel = path.relative_to(package_root)
                if not path.is_file() or rel.parts[0] in _NOT_IN_AGENT_WHEEL:
                    continue
                if "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
                    continue
                _write(whl, f"{package_root.name}/{rel.as_posix()}", path.read_bytes(), records)
        metadata = f"Metadata-Version: 2.1\nName: cvmjob\nVersion: {__version__}\n".encode()
        wheel = b"Wheel-Version: 1.0\nGenerator: cvmjob\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        _write(whl, f"{dist_info}/METADATA", metadata, records)
        _write(whl, f"{dist_info}/WHEEL", wheel, records)
        records.append(f"{dist_info}/RECORD,,")
        whl.writestr(_zipinfo(f"{dist_info}/RECORD"), "\n".join(records) + "\n")
    return buffer.getvalue()


def _zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def _write(whl: zipfile.ZipFile, arcname: str, data: bytes, records: list[str]) -> None:
    whl.writestr(_zipinfo(arcname), data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    records.append(f"{arcname},sha256={digest},{len(data)}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
