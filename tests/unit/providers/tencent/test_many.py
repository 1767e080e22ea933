"""Many small objects in one event loop, against the emulator. Down: each verified and renamed into place, and
each that fails (an error answer, a connection reset mid-body, an object replaced since its listing) handed back
with no file left behind; a local disk that refuses a write fails the whole call. Up: each put and verified, a
refused one handed back, a file that cannot be read failing the call."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from crc64ecma import update as crc64
from orchestrator.providers.tencent import StaticCredential, TencentSdk, errors
from orchestrator.providers.tencent.many import WHOLE_BODY
from orchestrator.providers.tencent.storage import ObjectInfo, ObjectStore, Sending, Wanted
from tests.emulator_process import EmulatorProcess

SIZE = 150_000


@pytest.fixture
def store(emulator: EmulatorProcess) -> ObjectStore:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint,
                     emulator.appid)
    store = ObjectStore(sdk, f"many-{uuid.uuid4().hex[:6]}-{emulator.appid}")
    store.create_bucket()
    return store


def put_objects(store: ObjectStore, count: int, large: int = 0) -> dict[str, bytes]:
    """``count`` small objects, and ``large`` of them over WHOLE_BODY (written as they stream in)."""
    data = {f"d/{i:03d}.bin": os.urandom((WHOLE_BODY * 5 // 2 if i < large else SIZE) + i) for i in range(count)}
    for key, body in data.items():
        store.put_bytes(key, body)
    return data


def wanted_of(store: ObjectStore, root: Path, counted: list[int] | None = None) -> list[Wanted]:
    return [Wanted(o, root / o.key, counted.append if counted is not None else None) for o in store.iter_objects("d/")]


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_every_object_lands_verified_and_done_is_told_of_each(store: ObjectStore, tmp_path: Path) -> None:
    data = put_objects(store, 40, large=3)
    counted: list[int] = []
    done: dict[str, ObjectInfo] = {}
    failed = store.download_many(wanted_of(store, tmp_path, counted), lambda w, info: done.setdefault(w.listed.key,
                                                                                                       info),
                                 concurrency=8)
    assert failed == []
    assert files_under(tmp_path) == data  # and no temporary file left
    assert sorted(done) == sorted(data)
    assert all(done[k].size == len(data[k]) and done[k].crc64 is not None for k in data)
    assert sum(counted) == sum(len(body) for body in data.values())


def test_objects_that_fail_are_handed_back_and_leave_no_file(store: ObjectStore, tmp_path: Path,
                                                             emulator: EmulatorProcess) -> None:
    data = put_objects(store, 12, large=1)
    emulator.admin.inject_cos("error", operation="GetObject", key_prefix="d/003", status=503, count=1)
    emulator.admin.inject_cos("reset_body", operation="GetObject", key_prefix="d/007", after_bytes=50_000, count=1)
    emulator.admin.inject_cos("reset_body", operation="GetObject", key_prefix="d/000", after_bytes=1_500_000, count=1)
    wanted = wanted_of(store, tmp_path)
    store.put_bytes("d/010.bin", b"replaced since the listing")
    failed = store.download_many(wanted, lambda w, info: None, concurrency=4)
    # the error answer and the broken body are retried; the replaced object goes to the general path
    assert sorted((w.listed.key, isinstance(exc, errors.TransientError)) for w, exc in failed) == [
        ("d/000.bin", True), ("d/003.bin", True), ("d/007.bin", True), ("d/010.bin", False)]
    assert [exc.code for w, exc in failed if w.listed.key == "d/010.bin"] == ["PreconditionFailed"]
    landed = files_under(tmp_path)
    assert sorted(landed) == sorted(set(data) - {"d/000.bin", "d/003.bin", "d/007.bin", "d/010.bin"})
    assert all(landed[k] == data[k] for k in landed)


def test_a_stop_takes_no_new_object(store: ObjectStore, tmp_path: Path) -> None:
    put_objects(store, 20)
    stop = threading.Event()
    done: list[str] = []

    def first_then_stop(w: Wanted, info: ObjectInfo) -> None:
        done.append(w.listed.key)
        stop.set()

    assert store.download_many(wanted_of(store, tmp_path), first_then_stop, concurrency=2, stop=stop) == []
    assert 1 <= len(done) <= 2  # those already in flight finish
    assert sorted(files_under(tmp_path)) == sorted(done)


def test_a_disk_that_refuses_a_write_fails_the_call(store: ObjectStore, tmp_path: Path) -> None:
    put_objects(store, 3)
    blocked = tmp_path / "d"
    blocked.write_text("a file where the folder should be")
    with pytest.raises(OSError):
        store.download_many(wanted_of(store, tmp_path), lambda w, info: None, concurrency=2)


def small_files(root: Path, count: int) -> dict[str, bytes]:
    data = {f"up/{i:03d}.bin": os.urandom(SIZE + i) for i in range(count)}
    for key, body in data.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)
    return data


def test_files_go_up_verified_and_done_is_told_each_crc(store: ObjectStore, tmp_path: Path) -> None:
    data = small_files(tmp_path, 30)
    done: dict[str, ObjectInfo] = {}
    failed = store.upload_many([Sending(tmp_path / key, key) for key in data],
                               lambda s, info: done.setdefault(s.key, info), concurrency=8)
    assert failed == []
    assert {o.key: store.get_bytes(o.key) for o in store.iter_objects("up/")} == data
    assert all(done[k].crc64 == crc64(data[k]) and done[k].size == len(data[k]) for k in data)


def test_a_put_cos_refuses_is_handed_back_and_a_missing_file_fails_the_call(
        store: ObjectStore, tmp_path: Path, emulator: EmulatorProcess) -> None:
    data = small_files(tmp_path, 6)
    emulator.admin.inject_cos("error", operation="PutObject", key_prefix="up/002", status=503, count=1)
    failed = store.upload_many([Sending(tmp_path / key, key) for key in data], lambda s, info: None, concurrency=3)
    assert [(s.key, isinstance(exc, errors.TransientError)) for s, exc in failed] == [("up/002.bin", True)]
    assert sorted(o.key for o in store.iter_objects("up/")) == sorted(set(data) - {"up/002.bin"})
    with pytest.raises(OSError):
        store.upload_many([Sending(tmp_path / "up" / "gone.bin", "up/gone.bin")], lambda s, info: None,
                          concurrency=1)
