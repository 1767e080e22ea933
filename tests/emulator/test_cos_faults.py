"""Injected COS faults as the SDK meets them (retry=0): 5xx answers, slow bodies, connections reset mid-body."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests
import urllib3
from qcloud_cos import CosS3Client
from qcloud_cos.cos_exception import CosClientError, CosServiceError

from tests.emulator_process import EmulatorProcess

KiB = 1024


def body_of(cos: CosS3Client, bucket: str, key: str) -> bytes:
    data: bytes = cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read()
    return data


def test_error_fault_answers_before_anything_happens(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    emulator.admin.inject_cos(
        "error", operation="PutObject", key_prefix="flaky/", status=503, code="ServiceUnavailable"
    )
    with pytest.raises(CosServiceError) as info:
        cos.put_object(Bucket=bucket, Key="flaky/a", Body=b"x")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (503, "ServiceUnavailable")
    assert not cos.object_exists(Bucket=bucket, Key="flaky/a")
    cos.put_object(Bucket=bucket, Key="flaky/a", Body=b"x")  # count=1: the next call goes through
    assert body_of(cos, bucket, "flaky/a") == b"x"


def test_error_fault_matches_operation_and_prefix(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    cos.put_object(Bucket=bucket, Key="a/x", Body=b"a")
    cos.put_object(Bucket=bucket, Key="b/x", Body=b"b")
    emulator.admin.inject_cos("error", operation="GetObject", key_prefix="b/", status=500, code="InternalError")
    assert body_of(cos, bucket, "a/x") == b"a"
    cos.head_object(Bucket=bucket, Key="b/x")
    with pytest.raises(CosServiceError) as info:
        body_of(cos, bucket, "b/x")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (500, "InternalError")


def test_slow_get_body(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    data = bytes(range(256)) * 800  # 200 KiB
    cos.put_object(Bucket=bucket, Key="slow", Body=data)
    emulator.admin.inject_cos("slow_body", operation="GetObject", bytes_per_second=400 * KiB)
    started = time.monotonic()
    assert body_of(cos, bucket, "slow") == data
    assert time.monotonic() - started >= 0.4  # 200 KiB at 400 KiB/s
    started = time.monotonic()
    assert body_of(cos, bucket, "slow") == data
    assert time.monotonic() - started < 0.4  # the fault fired once


def test_slow_put_body(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    data = b"p" * (200 * KiB)
    emulator.admin.inject_cos("slow_body", operation="PutObject", bytes_per_second=400 * KiB)
    started = time.monotonic()
    cos.put_object(Bucket=bucket, Key="slow-put", Body=data)
    assert time.monotonic() - started >= 0.4
    assert body_of(cos, bucket, "slow-put") == data


def test_reset_mid_get_body(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    data = b"r" * (256 * KiB)
    cos.put_object(Bucket=bucket, Key="reset", Body=data)
    emulator.admin.inject_cos("reset_body", operation="GetObject", after_bytes=1000)
    stream = cos.get_object(Bucket=bucket, Key="reset")["Body"].get_raw_stream()
    with pytest.raises((urllib3.exceptions.ProtocolError, requests.exceptions.ConnectionError)):
        stream.read()
    assert body_of(cos, bucket, "reset") == data


def test_reset_breaks_download_file(cos: CosS3Client, bucket: str, emulator: EmulatorProcess, tmp_path: Path) -> None:
    cos.put_object(Bucket=bucket, Key="dl", Body=b"d" * (3 * 1024 * KiB))
    emulator.admin.inject_cos("reset_body", operation="GetObject", after_bytes=0)
    with pytest.raises(CosClientError, match="download_part fail"):
        cos.download_file(
            Bucket=bucket,
            Key="dl",
            DestFilePath=str(tmp_path / "dl"),
            PartSize=1,
            MAXThread=1,
            DumpRecordDir=str(tmp_path),
        )
    assert not (tmp_path / "dl").exists()


def test_reset_during_put_commits_nothing(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    emulator.admin.inject_cos("reset_body", operation="PutObject", after_bytes=64 * KiB)
    with pytest.raises(CosClientError):
        cos.put_object(Bucket=bucket, Key="half", Body=b"h" * (1024 * KiB))
    assert not cos.object_exists(Bucket=bucket, Key="half")


def test_reset_after_complete_loses_only_the_answer(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    """For operations without a body the reset comes after the operation took effect: the client cannot tell
    whether it did, as when a real answer is lost."""
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="done")["UploadId"]
    etag = cos.upload_part(Bucket=bucket, Key="done", Body=b"part", PartNumber=1, UploadId=upload_id)["ETag"]
    emulator.admin.inject_cos("reset_body", operation="CompleteMultipartUpload")
    with pytest.raises(CosClientError):
        cos.complete_multipart_upload(
            Bucket=bucket, Key="done", UploadId=upload_id, MultipartUpload={"Part": [{"PartNumber": 1, "ETag": etag}]}
        )
    assert body_of(cos, bucket, "done") == b"part"
