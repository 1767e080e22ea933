"""The agent's own Python dependencies, shipped with it: one zip per CPython minor version (pydantic-core and
fastcrc are built per version), laid out as site-packages, fetched by the bootstrap through a presigned URL and
unpacked beside the agent. An instance then needs neither pip nor a package index to start the agent (one without
a public IP reaches only Tencent's mirror, and Ubuntu's images may not have pip at all).

Made from this installation when the image's Python is the controller's own (the same files, offline); for
another Python, the pure packages still come from here and the compiled ones, of the same versions, are downloaded
once with pip (manylinux x86_64 wheels). Kept in the user's cache (``$XDG_CACHE_HOME/cvmjob``, default
``~/.cache/cvmjob``). Deterministic: the same packages give the same bytes.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import io
import os
import platform
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from ..errors import CvmjobError
from .bootstrap import AGENT_REQUIREMENTS

# Wheels an Ubuntu 22.04/24.04 x86_64 instance runs (glibc 2.35+).
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


class DepsError(CvmjobError):
    """The agent's dependencies for a Python version could not be had (no index reachable, say)."""


@dataclass(frozen=True)
class Deps:
    python: tuple[int, int]
    data: bytes
    sha256: str

    @property
    def name(self) -> str:
        return f"agent-deps-cp{self.python[0]}{self.python[1]}.zip"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cvmjob" / "agent-deps"


def for_python(version: str) -> Deps:
    """The dependencies for CPython ``version`` ("3.10") on Linux x86_64, from the cache, this installation or
    pip."""
    major, minor = version.split(".")[:2]
    return _for_python((int(major), int(minor)))


@functools.cache
def _for_python(python: tuple[int, int]) -> Deps:
    key = hashlib.sha256(repr((AGENT_REQUIREMENTS, python, PLATFORMS)).encode()).hexdigest()[:16]
    cached = cache_dir() / f"cp{python[0]}{python[1]}-{key}.zip"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        # One maker at a time: the controllers of a sweep's trials, started together, wait for the first.
        with (cached.parent / f"{cached.name}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cached.is_file():
                data = _installed() if _is_this_interpreter(python) else _downloaded(python)
                partial = cached.with_suffix(f".{os.getpid()}.tmp")
                partial.write_bytes(data)
                partial.replace(cached)
    data = cached.read_bytes()
    return Deps(python, data, hashlib.sha256(data).hexdigest())


def _is_this_interpreter(python: tuple[int, int]) -> bool:
    return (sys.version_info[:2] == python and sys.implementation.name == "cpython" and sys.platform == "linux"
            and platform.machine() == "x86_64")


def _closure(python: tuple[int, int]) -> tuple[list[metadata.Distribution], list[Requirement]]:
    """What the agent's requirements pull in on ``python`` (markers evaluated for it): the distributions installed
    here, and the requirements this installation lacks (those of another Python only: async-timeout below 3.11)."""
    environment = {"extra": "", "python_version": f"{python[0]}.{python[1]}",
                   "python_full_version": f"{python[0]}.{python[1]}.0"}
    found: dict[str, metadata.Distribution] = {}
    missing: dict[str, Requirement] = {}
    todo = [Requirement(r) for r in AGENT_REQUIREMENTS]
    while todo:
        requirement = todo.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in found or name in missing:
            continue
        try:
            found[name] = distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            if _is_this_interpreter(python):
                raise DepsError(f"the agent needs {requirement.name}, which this installation lacks: reinstall "
                                "cvmjob") from None
            missing[name] = requirement
            continue
        for text in distribution.requires or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate(environment):
                todo.append(needed)
    return [found[n] for n in sorted(found)], [missing[n] for n in sorted(missing)]


def _files(distribution: metadata.Distribution, compiled: bool = True) -> dict[str, bytes]:
    """A distribution's files as installed here (site-packages relative), bytecode left out; ``compiled`` False: its
    extension modules left out too (they load on this Python only)."""
    members: dict[str, bytes] = {}
    for file in distribution.files or []:
        path = Path(str(distribution.locate_file(file)))
        if file.parts[0] == ".." or "__pycache__" in file.parts or file.suffix == ".pyc" or not path.is_file():
            continue  # scripts outside site-packages, bytecode
        if not compiled and file.suffix == ".so":
            continue
        members[file.as_posix()] = path.read_bytes()
    return members


def _is_compiled(distribution: metadata.Distribution) -> bool:
    return any(file.suffix == ".so" for file in distribution.files or [])


def _installed() -> bytes:
    members: dict[str, bytes] = {}
    for distribution in _closure(sys.version_info[:2])[0]:
        members.update(_files(distribution))
    return _zip(members)


def _downloaded(python: tuple[int, int]) -> bytes:
    """For another Python: the pure distributions that run there from this installation (the same versions,
    offline); the others as pip's manylinux wheels for ``python``, of the same version where it has one (pydantic
    pins its core), else the newest that does. One published only as a source archive (crcmod) comes from here
    without its extension modules, as its pure-Python fallback."""
    members: dict[str, bytes] = {}
    wanted = []
    installed, missing = _closure(python)
    for distribution in installed:
        if _is_compiled(distribution) or not _runs_on(distribution, python):
            wanted.append(distribution)
        else:
            members.update(_files(distribution))
    with tempfile.TemporaryDirectory(prefix="cvmjob-deps-") as folder:
        try:
            _pip_download(python, [_pinned(d) for d in wanted], Path(folder))
        except DepsError:  # one of them has no wheel of that version for that Python: one at a time
            for distribution in wanted:
                _one(distribution, python, Path(folder), members)
        if missing:  # not installed here: with what they need in turn
            # Without their markers, already evaluated for that Python (pip would evaluate them for this one).
            _pip_download(python, [f"{r.name}{r.specifier}" for r in missing], Path(folder), with_deps=True)
        for wheel in sorted(Path(folder).glob("*.whl")):
            with zipfile.ZipFile(wheel) as unpacked:
                for info in unpacked.infolist():
                    if not info.is_dir():
                        members.setdefault(info.filename, unpacked.read(info))
    return _zip(members)


def _one(distribution: metadata.Distribution, python: tuple[int, int], folder: Path,
         members: dict[str, bytes]) -> None:
    try:
        _pip_download(python, [_pinned(distribution)], folder)
        return
    except DepsError:
        pass
    try:
        _pip_download(python, [str(distribution.metadata["Name"])], folder)
    except DepsError:
        if not _has_fallback(distribution):
            raise
        members.update(_files(distribution, compiled=False))


def _pinned(distribution: metadata.Distribution) -> str:
    return f"{distribution.metadata['Name']}=={distribution.version}"


def _runs_on(distribution: metadata.Distribution, python: tuple[int, int]) -> bool:
    needed = distribution.metadata["Requires-Python"]
    return not needed or SpecifierSet(needed).contains(f"{python[0]}.{python[1]}")


# Compiled distributions with a pure-Python fallback of their own, published without wheels.
_FALLBACK = frozenset({"crcmod"})


def _has_fallback(distribution: metadata.Distribution) -> bool:
    return str(distribution.metadata["Name"]).lower() in _FALLBACK


def _pip_download(python: tuple[int, int], pinned: list[str], folder: Path, with_deps: bool = False) -> None:
    version = f"{python[0]}.{python[1]}"
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               *(() if with_deps else ("--no-deps",)), "--only-binary=:all:", "--implementation", "cp",
               "--python-version", version,
               *(f"--platform={p}" for p in PLATFORMS), "--dest", str(folder), *pinned]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise DepsError(f"pip could not download the agent's dependencies for Python {version}: "
                        f"{said[-1] if said else f'exit {exc.returncode}'}") from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise DepsError(f"pip could not download the agent's dependencies for Python {version}: {exc}") from exc


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            archive.writestr(info, members[name])
    return buffer.getvalue()
