from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.paths import NodePaths
from orchestrator.agent.stop import StopSignal
from orchestrator.agent.workdir import UnsafeArchive, extract, prepare_workdir, run_setup
from orchestrator.contract import Outcome
from tests.unit.agent.fakes import MemoryStore


def archive(path: Path, *members: tarfile.TarInfo, files: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (files or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for member in members:
            tar.addfile(member)
    return path


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_a_normal_archive_is_extracted_with_its_folders_and_inner_links(tmp_path: Path) -> None:
    path = archive(tmp_path / "a.tar.gz", link("sub/link", "../train.py"),
                   files={"train.py": b"print(1)\n", "sub/data.txt": b"x"})
    extract(path, tmp_path / "workdir")
    assert (tmp_path / "workdir/train.py").read_bytes() == b"print(1)\n"
    assert (tmp_path / "workdir/sub/link").read_bytes() == b"print(1)\n"


@pytest.mark.parametrize("member", [
    tarfile.TarInfo("/etc/passwd"), tarfile.TarInfo("../outside"), tarfile.TarInfo("a/../../outside"),
    link("evil", "/etc/passwd"), link("a/evil", "../../x"), link("hard", "../x", tarfile.LNKTYPE),
    link("dev", "", tarfile.CHRTYPE),
])
def test_members_that_could_escape_refuse_the_whole_archive(tmp_path: Path, member: tarfile.TarInfo) -> None:
    path = archive(tmp_path / "bad.tar.gz", member, files={"ok.txt": b"x"})
    with pytest.raises(UnsafeArchive):
        extract(path, tmp_path / "workdir")
    assert not (tmp_path / "workdir").exists() and not (tmp_path / "outside").exists()


def test_the_archive_is_extracted_once_per_etag(tmp_path: Path) -> None:
    store = MemoryStore()
    store.objects["bundle/workdir.tar.gz"] = archive(tmp_path / "a.tar.gz", files={"t.py": b"1"}).read_bytes()
    paths = NodePaths(tmp_path / "node")
    prepare_workdir(paths, store, "bundle/workdir.tar.gz")  # type: ignore[arg-type]
    (paths.workdir / "checkpoints").mkdir()
    prepare_workdir(paths, store, "bundle/workdir.tar.gz")  # type: ignore[arg-type]
    assert (paths.workdir / "checkpoints").is_dir() and (paths.workdir / "t.py").read_bytes() == b"1"
    with pytest.raises(AttemptEnded) as ended:
        prepare_workdir(paths, store, "bundle/missing.tar.gz")  # type: ignore[arg-type]
    assert ended.value.outcome == Outcome.SETUP_FAILED


def test_setup_commands_run_in_order_and_the_first_failure_ends_the_attempt(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    env = {"GREETING": "hi", "PATH": "/usr/bin:/bin"}
    run_setup(["echo one > out.txt", "echo $GREETING >> out.txt"], tmp_path, env, log, StopSignal())
    assert (tmp_path / "out.txt").read_text() == "one\nhi\n"
    with pytest.raises(AttemptEnded) as ended:
        run_setup(["echo broken >&2; exit 4", "touch never"], tmp_path, {"PATH": "/usr/bin:/bin"}, log, StopSignal())
    assert (ended.value.outcome, ended.value.exit_code) == (Outcome.SETUP_FAILED, 4)
    assert "setup command 1" in ended.value.reason and not (tmp_path / "never").exists()
    assert "broken" in log.read_text()


MIRROR = "http://mirrors.tencentyun.com/pypi/simple"


def test_a_setup_that_cannot_reach_the_network_without_a_public_ip_is_told_the_mirror(tmp_path: Path) -> None:
    log, env = tmp_path / "run.log", {"PATH": "/usr/bin:/bin"}
    pip_says = ("echo \"WARNING: Retrying after connection broken by 'ProxyError('Cannot connect to proxy.', "
                "OSError('Tunnel connection failed: 502 Unreachable'))': /simple/requests/\" >&2; exit 1")
    with pytest.raises(AttemptEnded) as ended:
        run_setup([pip_says], tmp_path, env, log, StopSignal(), mirror=MIRROR)
    assert ended.value.reason.startswith(f"setup command 1 ({pip_says!r}) exited with 1: it could not reach the "
                                         "network, and this instance has no public IP, so it reaches only Tencent's "
                                         f"mirror {MIRROR} ")
    assert "\n" not in ended.value.reason
    # Another failure, or the same one on an instance with a public IP, is not about the mirror.
    for command, mirror in (("echo 'No matching distribution found' >&2; exit 1", MIRROR), (pip_says, None)):
        with pytest.raises(AttemptEnded) as other:
            run_setup([command], tmp_path, env, log, StopSignal(), mirror=mirror)
        assert "mirror" not in other.value.reason
