"""Buckets, objects and unfinished uploads live under --state-dir: a restarted emulator still has them."""

from __future__ import annotations

import os
from pathlib import Path

from tests.emulator.conftest import make_cos
from tests.emulator_process import start_emulator


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    first = start_emulator(state)
    try:
        cos = make_cos(first)
        bucket = f"persist-{first.appid}"
        cos.create_bucket(Bucket=bucket)
        cos.put_object(Bucket=bucket, Key="small.txt", Body=b"kept", Metadata={"x-cos-meta-k": "v"})
        cos.upload_file(Bucket=bucket, Key="big.bin", LocalFilePath=str(big), PartSize=1)
        pending = cos.create_multipart_upload(Bucket=bucket, Key="pending")["UploadId"]
        cos.upload_part(Bucket=bucket, Key="pending", Body=b"part one", PartNumber=1, UploadId=pending)
        etags = {key: cos.head_object(Bucket=bucket, Key=key)["ETag"] for key in ("small.txt", "big.bin")}
    finally:
        first.stop()

    second = start_emulator(state)
    try:
        cos = make_cos(second)
        assert [b["Name"] for b in cos.list_buckets()["Buckets"]["Bucket"]] == [bucket]
        assert [c["Key"] for c in cos.list_objects(Bucket=bucket)["Contents"]] == ["big.bin", "small.txt"]
        small = cos.get_object(Bucket=bucket, Key="small.txt")
        assert small["Body"].get_raw_stream().read() == b"kept"
        assert small["x-cos-meta-k"] == "v"
        assert cos.get_object(Bucket=bucket, Key="big.bin")["Body"].get_raw_stream().read() == big.read_bytes()
        assert {key: cos.head_object(Bucket=bucket, Key=key)["ETag"] for key in etags} == etags
        uploads = cos.list_multipart_uploads(Bucket=bucket)["Upload"]
        assert [(u["Key"], u["UploadId"]) for u in uploads] == [("pending", pending)]
        parts = cos.list_parts(Bucket=bucket, Key="pending", UploadId=pending)["Part"]
        assert [p["Size"] for p in parts] == ["8"]
    finally:
        second.stop()
