from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import random
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from orchestrator import __version__
from orchestrator.staging.bootstrap import AGENT_REQUIREMENTS, MAX_USER_DATA, user_data
from orchestrator.staging.bundle import BundleError, agent_wheel, workdir_archive, workdir_files


def test_the_workdir_honours_gitignore_files_and_skips_git_and_excluded_folders(tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("x")
    (root / "data" / "raw").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / ".gitignore").write_text("*.log\ndata/\n")
    (root / "sub" / ".gitignore").write_text("secret.txt\n")
    for name in ("train.py", "run.log", "data/raw/big.bin", "sub/keep.py", "sub/secret.txt", "home/state.db"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    files = [p.as_posix() for p in workdir_files(root, exclude=(root / "home",))]
    assert files == [".gitignore", "sub/.gitignore", "sub/keep.py", "train.py"]


def test_the_archive_is_deterministic(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    first = workdir_archive(root, tmp_path / "a.tgz")
    (root / "train.py").touch()  # a new mtime changes nothing
    second = workdir_archive(root, tmp_path / "b.tgz")
    assert first.sha256 == second.sha256 and first.files == 1
    with tarfile.open(first.path) as tar:
        assert tar.getnames() == ["train.py"]


def test_the_agent_wheel_holds_the_package_but_not_the_emulator_or_the_cli() -> None:
    wheel = agent_wheel()
    assert wheel.name == f"cvmjob-{__version__}-py3-none-any.whl"
    assert wheel.sha256 == hashlib.sha256(wheel.data).hexdigest()
    names = zipfile.ZipFile(io.BytesIO(wheel.data)).namelist()
    assert "orchestrator/agent/__main__.py" in names and "orchestrator/trainkit.py" in names
    assert not any(n.startswith(("orchestrator/emulator/", "orchestrator/cli/")) for n in names)
    assert any(n.endswith(".dist-info/RECORD") for n in names)


def test_user_data_is_a_script_with_urls_and_no_keys() -> None:
    encoded = user_data("job-1", 2, 0, "http://b.cos/agent.whl?q-sign=x", "http://b.cos/agent.json?q-sign=y")
    script = base64.b64decode(encoded).decode()
    assert script.startswith("#!/bin/bash") and "'http://b.cos/agent.whl?q-sign=x'" in script
    assert len(encoded) < MAX_USER_DATA


def test_user_data_over_16_kb_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 16384"):
        user_data("job-1", 1, 0, "http://x/" + "a" * 20_000, "http://y")


def test_the_agent_imports_nothing_its_bootstrap_does_not_install() -> None:
    # On a real image the agent has only the standard library, torch and what AGENT_REQUIREMENTS installs (with
    # what they need in turn); the emulator's instances run in this virtualenv, where everything is there, so a
    # dependency missing from the list would only show on Tencent Cloud.
    imported = subprocess.run(
        [sys.executable, "-c", "import sys; before = set(sys.modules); "
                               "import orchestrator.agent.__main__, orchestrator.agent.install; "
                               "print(' '.join({m.split('.')[0] for m in set(sys.modules) - before}))"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[3]).stdout.split()
    provided = _closure(Requirement(r).name for r in AGENT_REQUIREMENTS) | {"cvmjob"}  # cvmjob: the agent's wheel
    by_module = importlib.metadata.packages_distributions()
    third_party = {m for m in imported if m in by_module and m not in sys.stdlib_module_names}
    missing = {m: by_module[m] for m in third_party if not {_norm(d) for d in by_module[m]} & provided}
    assert missing == {}, f"the agent imports {missing}, which AGENT_REQUIREMENTS does not install"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(names: Iterable[str]) -> set[str]:
    """The distributions named and every one they require, as installed here (extras left out)."""
    seen: set[str] = set()
    todo = [_norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(_norm(requirement.name))
    return seen


def test_a_full_disk_while_archiving_is_one_error_naming_the_archive_and_the_free_space(tmp_path: Path) -> None:
    # Writes to /dev/full fail with ENOSPC, for root too (issue 27, item 11: the job stayed in STAGING).
    root = tmp_path / "work"
    root.mkdir()
    (root / "train.py").write_bytes(b"x" * 100_000)
    with pytest.raises(BundleError) as caught:
        workdir_archive(root, Path("/dev/full"))
    message = str(caught.value)
    assert "cannot write the workdir archive /dev/full" in message and "No space left on device" in message
    assert "free" in message, message
    assert Path("/dev/full").is_char_device()  # never removed: only a partial archive of ours is


def test_a_partial_archive_is_removed_when_the_file_size_limit_stops_it(tmp_path: Path) -> None:
    # RLIMIT_FSIZE (in a process of its own) stops the archive midway, deterministically and for root too.
    root = tmp_path / "work"
    root.mkdir()
    (root / "weights.bin").write_bytes(random.Random(1).randbytes(400_000))  # incompressible
    dest = tmp_path / "out" / "w.tgz"
    dest.parent.mkdir()
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from orchestrator.staging.bundle import BundleError, workdir_archive\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))\n"
        "try:\n"
        f"    workdir_archive(Path({str(root)!r}), Path({str(dest)!r}))\n"
        "except BundleError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 7, done.stderr
    assert f"cannot write the workdir archive {dest}" in done.stdout and "File too large" in done.stdout, done.stdout
    assert list(dest.parent.iterdir()) == []  # the partial archive is gone
