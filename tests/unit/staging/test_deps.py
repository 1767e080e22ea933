"""The agent's dependencies shipped with it: the bootstrap starts the agent on a Python that has nothing but its
standard library, without pip or an index."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import threading
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.staging import bundle, deps
from orchestrator.staging.bootstrap import Shipped, user_data

THIS = sys.version_info[:2]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    deps._for_python.cache_clear()
    yield tmp_path / "cache" / "cvmjob" / "agent-deps"
    deps._for_python.cache_clear()


def test_the_bootstrap_starts_the_agent_on_a_bare_python_with_the_shipped_dependencies(cache: Path,
                                                                                     tmp_path: Path) -> None:
    shipped = deps.for_python(f"{THIS[0]}.{THIS[1]}")  # this interpreter's own packages, offline
    assert shipped.name == f"agent-deps-cp{THIS[0]}{THIS[1]}.zip"
    assert len(list(cache.glob(f"cp{THIS[0]}{THIS[1]}-*.zip"))) == 1  # kept for the next controller
    files = tmp_path / "files"
    files.mkdir()
    (files / "agent.whl").write_bytes(bundle.agent_wheel().data)
    (files / "agent.json").write_text("{}")
    (files / "deps.zip").write_bytes(shipped.data)
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # python3 with its standard library only: no pip, no site-packages
    script = base64.b64decode(user_data(
        "job-1", 1, 0, (files / "agent.whl").as_uri(), (files / "agent.json").as_uri(),
        pip_index="http://127.0.0.1:9/unreachable",
        deps=Shipped(f"{THIS[0]}.{THIS[1]}", (files / "deps.zip").as_uri()),
    )).decode()
    start = script.index('PYTHONPATH="$STAGE/lib" exec python3 -m orchestrator.agent.install')
    script = script[:start] + ('PYTHONPATH="$STAGE/lib" exec python3 -c "import orchestrator.agent.attempt, '
                               'qcloud_cos, tencentcloud.cvm.v20170312.cvm_client; print(\'agent ready\')"\n')
    env = {"PATH": f"{bare / 'bin'}:/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "agent ready"), done.stderr[-3000:]
    assert "pip" not in done.stderr  # nothing was installed with pip (its index is unreachable anyway)


def test_on_another_python_the_shipped_dependencies_are_left_alone_for_pip(tmp_path: Path) -> None:
    shipped = Shipped("3.10", "http://d")
    script = base64.b64decode(user_data("job-1", 1, 0, "http://w", "http://c", deps=shipped)).decode()
    assert "sys.exit(sys.version_info[:2] != (3, 10))' && fetch http://d deps.zip" in script
    assert script.index("fetch http://d deps.zip") < script.index("python3 -m pip install")  # pip comes last


def test_another_pythons_compiled_dependencies_are_downloaded_once_as_manylinux_wheels(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []

    def pip(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        asked.append(command)
        dest = Path(command[command.index("--dest") + 1])
        with zipfile.ZipFile(dest / "pydantic_core-2-cp310-cp310-manylinux2014_x86_64.whl", "w") as wheel:
            wheel.writestr("pydantic_core/_pydantic_core.cpython-310-x86_64-linux-gnu.so", b"x")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(deps.subprocess, "run", pip)
    other = (3, 10) if THIS != (3, 10) else (3, 12)
    shipped = deps.for_python(f"{other[0]}.{other[1]}")
    names = zipfile.ZipFile(io.BytesIO(shipped.data)).namelist()
    assert "pydantic_core/_pydantic_core.cpython-310-x86_64-linux-gnu.so" in names  # the wheel pip brought
    assert "pydantic/main.py" in names and "tencentcloud/cvm/v20170312/models.py" in names  # pure: from here
    assert not [n for n in names if n.endswith(f"cpython-{THIS[0]}{THIS[1]}-x86_64-linux-gnu.so")]  # not ours
    first = asked[0]
    assert first[first.index("--python-version") + 1] == f"{other[0]}.{other[1]}"
    assert {"--only-binary=:all:", "--no-deps", "--platform=manylinux2014_x86_64"} <= set(first)
    assert any(pin.startswith("pydantic_core==") for pin in first)  # the version pydantic pins
    deps._for_python.cache_clear()
    calls = len(asked)
    assert deps.for_python(f"{other[0]}.{other[1]}").sha256 == shipped.sha256 and len(asked) == calls  # from the cache


def test_a_failed_download_says_what_pip_said(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.CalledProcessError(1, command, "", "ERROR: No matching distribution found for fastcrc\n")

    monkeypatch.setattr(deps.subprocess, "run", offline)
    with pytest.raises(deps.DepsError) as failed:
        deps.for_python("3.10" if THIS != (3, 10) else "3.12")
    assert str(failed.value).endswith("ERROR: No matching distribution found for fastcrc")


def test_controllers_started_together_download_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    downloads: list[tuple[int, int]] = []

    def slow(python: tuple[int, int]) -> bytes:
        downloads.append(python)
        time.sleep(0.3)  # long enough for the others to find no cache yet
        return b"zip"

    monkeypatch.setattr(deps, "_downloaded", slow)
    other = "3.10" if THIS != (3, 10) else "3.12"
    threads = [threading.Thread(target=deps._for_python.__wrapped__, args=(tuple(map(int, other.split("."))),))
               for _ in range(4)]  # each as a process of its own would, past the in-process cache
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(downloads) == 1
