"""What the emulator protects on a shared host (issue 27, item 5): whoever holds its SecretKey can run code as the
emulator's user (RunInstances' UserData is a process of that user), so the key is private to that user: random per
emulator, kept in a 0600 file in a 0700 state directory, passed by environment or file and never on a command line
(which `ps` shows to every user); the admin API takes that key and no other; seeding reads only folders under the
roots the emulator was told at start; and it listens on loopback unless it was given a key on purpose."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.emulator.client import AdminClient, AdminError
from orchestrator.emulator.launcher import proxy_free_environment
from tests.emulator.conftest import make_cos
from tests.emulator_process import EmulatorProcess, start_emulator

# The key every emulator accepted before: published in the README, so anyone on the host had it.
PUBLIC_OLD_KEY = "cvmjobEmulatorSecretKey000000000"
KEY_VARIABLE = "TENCENTCLOUD_EMULATOR_SECRET_KEY"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def argvs() -> dict[int, bytes]:
    """Every process's command line that this user can read (as `ps` shows them to anyone)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:  # gone meanwhile
                continue
    return found


@pytest.fixture
def own(tmp_path: Path) -> Iterator[EmulatorProcess]:
    server = start_emulator(tmp_path / "state")
    yield server
    server.stop()


def test_a_random_key_per_emulator_in_a_0600_file_of_a_0700_state_directory(own: EmulatorProcess,
                                                                          tmp_path: Path) -> None:
    key_file = own.state_dir / "secret_key"
    assert mode(own.state_dir) == 0o700
    assert mode(key_file) == 0o600
    assert key_file.read_text().strip() == own.secret_key != PUBLIC_OLD_KEY
    assert len(own.secret_key) >= 32
    assert own.admin.health()["ok"]
    other = start_emulator(tmp_path / "other")
    try:
        assert other.secret_key != own.secret_key
    finally:
        other.stop()


def test_a_restarted_emulator_keeps_its_key(tmp_path: Path) -> None:
    first = start_emulator(tmp_path / "state")
    first.stop()
    again = start_emulator(tmp_path / "state")
    try:
        assert again.secret_key == first.secret_key
        assert again.admin.health()["ok"]
    finally:
        again.stop()


def test_a_wrong_key_cannot_use_the_admin_api(own: EmulatorProcess) -> None:
    for wrong in (PUBLIC_OLD_KEY, "", own.secret_key[:-1], own.secret_key + "x"):
        with pytest.raises(AdminError) as refused:
            AdminClient(own.endpoint, wrong).reset()
        assert refused.value.status == 403, wrong


def test_the_key_is_on_no_command_line_given_by_environment_or_by_file(tmp_path: Path) -> None:
    by_env = start_emulator(tmp_path / "env", secret_key="fromenv" + "0" * 25)
    file = tmp_path / "given.key"
    file.write_text("fromfile" + "1" * 24 + "\n")
    file.chmod(0o600)
    by_file = start_emulator(tmp_path / "file", "--secret-key-file", str(file))
    generated = start_emulator(tmp_path / "generated")
    try:
        assert by_env.admin.health()["ok"] and by_env.secret_key == "fromenv" + "0" * 25
        assert by_file.admin.health()["ok"] and by_file.secret_key == "fromfile" + "1" * 24
        command_lines = argvs()
        for server in (by_env, by_file, generated):
            assert server.process.pid in command_lines
            for pid, argv in command_lines.items():
                assert server.secret_key.encode() not in argv, (pid, argv)
        # A key given on purpose is not copied into the state directory: it lives where its owner put it.
        assert not (tmp_path / "env" / "secret_key").exists() and not (tmp_path / "file" / "secret_key").exists()
    finally:
        for server in (by_env, by_file, generated):
            server.stop()


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`serve` expected to refuse before it listens (a timeout here means it served instead)."""
    argv = [sys.executable, "-m", "orchestrator.emulator", "serve", "--port", "0", "--state-dir",
            str(tmp_path / "refused"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={**proxy_free_environment(), **(env or {})})


def test_a_key_on_the_command_line_or_in_a_file_others_can_read_is_refused(tmp_path: Path) -> None:
    on_argv = serve(tmp_path, "--secret-key", "visible" * 5)
    assert on_argv.returncode == 2 and on_argv.stderr.count("\n") == 1, on_argv.stderr
    assert on_argv.stderr.startswith("error: --secret-key ") and KEY_VARIABLE in on_argv.stderr
    shared = tmp_path / "shared.key"
    shared.write_text("k" * 32)
    shared.chmod(0o644)
    readable = serve(tmp_path, "--secret-key-file", str(shared))
    assert readable.returncode == 2 and readable.stderr == (
        f"error: the key file {shared} can be read by other users (mode 0644): chmod 600 {shared}\n")
    missing = serve(tmp_path, "--secret-key-file", str(tmp_path / "none.key"))
    assert missing.returncode == 2 and missing.stderr.startswith(f"error: cannot read the key file {tmp_path}")


def test_the_default_bind_is_loopback_and_another_address_needs_a_key_given_on_purpose(
    own: EmulatorProcess, tmp_path: Path
) -> None:
    assert own.endpoint.startswith("127.0.0.1:")
    ready = json.loads((own.state_dir.parent / "state.ready.json").read_text())
    assert ready["endpoint"] == own.endpoint
    exposed = serve(tmp_path, "--host", "0.0.0.0")
    assert exposed.returncode == 2 and exposed.stderr.count("\n") == 1, exposed.stderr
    assert exposed.stderr.startswith("error: --host 0.0.0.0 is not a loopback address") and KEY_VARIABLE in (
        exposed.stderr)
    assert not (tmp_path / "refused" / "secret_key").exists()


def test_seeding_outside_the_roots_given_at_start_is_refused_and_reads_nothing(tmp_path: Path) -> None:
    allowed, private = tmp_path / "allowed", tmp_path / "private"
    (allowed / "data").mkdir(parents=True)
    (allowed / "data" / "ok.txt").write_text("fine")
    private.mkdir()
    (private / "id_rsa").write_bytes(b"PRIVATE-KEY-BYTES")
    (private / "id_rsa").chmod(0o600)
    (allowed / "links").mkdir()
    (allowed / "links" / "key").symlink_to(private / "id_rsa")
    (allowed / "escape").symlink_to(private)
    server = start_emulator(tmp_path / "state", "--seed-root", str(allowed))
    try:
        bucket = f"seeded-{server.appid}"
        for folder in (private, allowed / "links", allowed / "escape", allowed / ".." / "private", Path("/etc")):
            with pytest.raises(AdminError) as refused:
                server.admin.seed(bucket, "p/", folder)
            assert refused.value.status == 400, folder
            assert f"may seed only from folders under {allowed}" in refused.value.detail, refused.value.detail
        assert not make_cos(server).bucket_exists(Bucket=bucket)  # everything is checked before anything changes
        for where, _, files in os.walk(server.state_dir):
            for name in files:
                assert b"PRIVATE-KEY-BYTES" not in Path(where, name).read_bytes(), name
        assert server.admin.seed(bucket, "p/", allowed / "data")["files"] == 1  # a folder under the root is fine
    finally:
        server.stop()
