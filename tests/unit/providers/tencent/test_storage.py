"""Files through ObjectStore against the emulator: large ones in parallel parts and ranges, verified by the CRC-64s
of the pieces combined (the file is read once), and never visible under the final name unless verified."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import crc64ecma
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.errors import TransientError
from orchestrator.providers.tencent.storage import (
    ChecksumMismatch,
    ObjectInfo,
    ObjectStore,
    _all_of,
    _PartReader,
    file_crc64,
)
from tests.emulator_process import EmulatorProcess

PART = 1024 * 1024  # COS's smallest part (but the last)


@pytest.fixture
def store(emulator: EmulatorProcess) -> ObjectStore:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint,
                     emulator.appid)
    store = ObjectStore(sdk, f"files-{uuid.uuid4().hex[:6]}-{emulator.appid}", part_size=PART, threads=4)
    store.create_bucket()
    return store


def test_a_large_file_goes_up_in_parts_and_comes_down_in_ranges(store: ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(4 * PART + 123))  # four full parts and a short one
    sent: list[int] = []
    uploaded = store.upload_file(source, "ckpt/big.bin", sent.append)
    assert (uploaded.size, uploaded.crc64, sum(sent)) == (4 * PART + 123, file_crc64(source), 4 * PART + 123)
    received: list[int] = []
    downloaded = store.download_file("ckpt/big.bin", tmp_path / "back.bin", received.append)
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
    assert (downloaded.crc64, sum(received)) == (uploaded.crc64, uploaded.size)


def test_ranges_that_do_not_add_up_to_the_object_leave_no_file(store: ObjectStore, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(3 * PART))
    store.upload_file(source, "big.bin")
    real_head = store.head

    def head_with_another_crc(key: str) -> ObjectInfo | None:
        info = real_head(key)
        assert info is not None and info.crc64 is not None
        return dataclasses.replace(info, crc64=info.crc64 ^ 1)

    monkeypatch.setattr(store, "head", head_with_another_crc)
    with pytest.raises(ChecksumMismatch):
        store.download_file("big.bin", tmp_path / "out" / "big.bin")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_small_upload_returns_the_crc_it_verified(store: ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "small.bin"
    source.write_bytes(b"weights" * 100)
    assert store.upload_file(source, "small.bin").crc64 == file_crc64(source)


def test_a_failed_range_cancels_what_has_not_started_and_returns_once_nothing_runs() -> None:
    started: list[int] = []
    running: list[int] = []

    def fetch(n: int) -> int:
        started.append(n)
        running.append(n)
        try:
            if n == 1:
                raise OSError("reset")
            time.sleep(0.2)
            return n
        finally:
            running.remove(n)

    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(OSError, match="reset"):
        _all_of(pool, fetch, list(range(10)))
    assert running == []  # range 0 had ended before the error came out
    assert 0 in started and len(started) < 10


def test_stores_sharing_one_executor_move_large_files_both_ways(store: ObjectStore, tmp_path: Path,
                                                               emulator: EmulatorProcess) -> None:
    with ThreadPoolExecutor(max_workers=3) as ranges:
        shared = ObjectStore(store.sdk, store.bucket, part_size=PART, ranges=ranges)
        sources = [tmp_path / f"big-{i}.bin" for i in range(3)]
        for source in sources:
            source.write_bytes(os.urandom(3 * PART + 7))
        with ThreadPoolExecutor(max_workers=3) as files:  # three files at once, their parts on the three workers
            sent = list(files.map(lambda s: shared.upload_file(s, f"shared/{s.name}"), sources))
            back = list(files.map(lambda s: shared.download_file(f"shared/{s.name}", tmp_path / "back" / s.name),
                                  sources))
        assert [i.crc64 for i in sent] == [i.crc64 for i in back] == [file_crc64(s) for s in sources]
        emulator.admin.inject_cos("reset_body", operation="GetObject", key_prefix="shared/big-0", after_bytes=1000)
        try:
            with pytest.raises(TransientError):
                shared.download_file("shared/big-0.bin", tmp_path / "again" / "big-0.bin")
        finally:
            emulator.admin.clear_faults()
        assert list((tmp_path / "again").iterdir()) == []  # neither the file nor its part file


def test_a_part_is_read_from_its_offset_as_it_is_sent_and_checksummed_on_the_way(tmp_path: Path) -> None:
    source = tmp_path / "f.bin"
    data = os.urandom(3 * PART)
    source.write_bytes(data)
    with _PartReader(source, PART, PART + 5) as part:
        blocks = iter(lambda: part.read(64 * 1024), b"")
        assert b"".join(blocks) == data[PART : 2 * PART + 5]
    assert (part.sent, part.crc) == (PART + 5, crc64ecma.update(data[PART : 2 * PART + 5]))
