"""Multipart uploads through the SDK: by hand (with the errors COS answers), and the SDK's own resumable
upload_file / download_file with CRC checking (tencent-cloud-api.md §0 items 15-16)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastcrc import crc64
from qcloud_cos import CosS3Client
from qcloud_cos.cos_exception import CosServiceError

from tests.emulator_process import EmulatorProcess

MiB = 1024 * 1024


def md5_etag(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def upload_parts(
    cos: CosS3Client, bucket: str, key: str, upload_id: str, parts: list[bytes]
) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = []
    for number, data in enumerate(parts, 1):
        etag = cos.upload_part(Bucket=bucket, Key=key, Body=data, PartNumber=number, UploadId=upload_id)["ETag"]
        assert etag == md5_etag(data)
        listed.append({"PartNumber": number, "ETag": etag})
    return listed


def complete(
    cos: CosS3Client, bucket: str, key: str, upload_id: str, listed: list[dict[str, object]]
) -> dict[str, str]:
    result: dict[str, str] = cos.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Part": listed}
    )
    return result


def error_code(info: pytest.ExceptionInfo[CosServiceError]) -> tuple[int, str]:
    return info.value.get_status_code(), info.value.get_error_code()


def test_multipart_by_hand(cos: CosS3Client, bucket: str) -> None:
    parts = [b"a" * MiB, b"b" * MiB, b"tail"]
    key = "mp/obj.bin"
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key=key, ContentType="application/x-test")["UploadId"]
    listed = upload_parts(cos, bucket, key, upload_id, parts)
    result = complete(cos, bucket, key, upload_id, listed)
    whole = b"".join(parts)
    expected_etag = '"{}-3"'.format(hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest())
    assert result["ETag"] == expected_etag
    assert result["Key"] == key
    assert result["Location"].endswith("/mp/obj.bin")
    head = cos.head_object(Bucket=bucket, Key=key)
    assert head["ETag"] == expected_etag
    assert head["Content-Length"] == str(len(whole))
    assert head["Content-Type"] == "application/x-test"
    assert head["x-cos-hash-crc64ecma"] == str(crc64.xz(whole))  # combined from the parts' CRCs
    assert cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read() == whole
    assert "Upload" not in cos.list_multipart_uploads(Bucket=bucket)


def test_reuploading_a_part_replaces_it(cos: CosS3Client, bucket: str) -> None:
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="re")["UploadId"]
    upload_parts(cos, bucket, "re", upload_id, [b"old"])
    listed = upload_parts(cos, bucket, "re", upload_id, [b"new!"])
    complete(cos, bucket, "re", upload_id, listed)
    assert cos.get_object(Bucket=bucket, Key="re")["Body"].get_raw_stream().read() == b"new!"


def test_complete_checks_the_part_list(cos: CosS3Client, bucket: str) -> None:
    key = "mp/checked"
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    listed = upload_parts(cos, bucket, key, upload_id, [b"x" * 100, b"y" * MiB, b"z"])

    with pytest.raises(CosServiceError) as info:
        complete(cos, bucket, key, upload_id, [listed[1], listed[0]])
    assert error_code(info) == (400, "InvalidPartOrder")
    with pytest.raises(CosServiceError) as info:
        complete(cos, bucket, key, upload_id, [{"PartNumber": 1, "ETag": md5_etag(b"other")}])
    assert error_code(info) == (400, "InvalidPart")
    with pytest.raises(CosServiceError) as info:
        complete(cos, bucket, key, upload_id, [*listed[:2], {"PartNumber": 4, "ETag": listed[2]["ETag"]}])
    assert error_code(info) == (400, "InvalidPart")
    with pytest.raises(CosServiceError) as info:
        complete(cos, bucket, key, upload_id, listed)  # part 1 is 100 bytes and not the last
    assert error_code(info) == (400, "EntityTooSmall")

    # A subset is fine: parts not listed are dropped.
    complete(cos, bucket, key, upload_id, listed[1:])
    assert cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read() == b"y" * MiB + b"z"
    with pytest.raises(CosServiceError) as info:
        complete(cos, bucket, key, upload_id, listed[1:])
    assert error_code(info) == (404, "NoSuchUpload")


def test_abort_and_unknown_upload(cos: CosS3Client, bucket: str) -> None:
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="gone")["UploadId"]
    upload_parts(cos, bucket, "gone", upload_id, [b"data"])
    cos.abort_multipart_upload(Bucket=bucket, Key="gone", UploadId=upload_id)
    calls: list[Callable[[], object]] = [
        lambda: cos.upload_part(Bucket=bucket, Key="gone", Body=b"x", PartNumber=2, UploadId=upload_id),
        lambda: cos.list_parts(Bucket=bucket, Key="gone", UploadId=upload_id),
        lambda: cos.abort_multipart_upload(Bucket=bucket, Key="gone", UploadId=upload_id),
    ]
    for call in calls:
        with pytest.raises(CosServiceError) as info:
            call()
        assert error_code(info) == (404, "NoSuchUpload")
    assert not cos.object_exists(Bucket=bucket, Key="gone")


def test_part_number_out_of_range(cos: CosS3Client, bucket: str) -> None:
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="n")["UploadId"]
    with pytest.raises(CosServiceError) as info:
        cos.upload_part(Bucket=bucket, Key="n", Body=b"x", PartNumber=10001, UploadId=upload_id)
    assert error_code(info) == (400, "InvalidArgument")


def test_list_parts_pages(cos: CosS3Client, bucket: str) -> None:
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="many")["UploadId"]
    upload_parts(cos, bucket, "many", upload_id, [bytes([i]) * (i + 1) for i in range(5)])
    first = cos.list_parts(Bucket=bucket, Key="many", UploadId=upload_id, MaxParts=2)
    assert [p["PartNumber"] for p in first["Part"]] == ["1", "2"]
    assert (first["IsTruncated"], first["NextPartNumberMarker"]) == ("true", "2")
    rest = cos.list_parts(Bucket=bucket, Key="many", UploadId=upload_id, PartNumberMarker=2)
    assert [(p["PartNumber"], p["Size"]) for p in rest["Part"]] == [("3", "3"), ("4", "4"), ("5", "5")]
    assert rest["IsTruncated"] == "false"
    assert rest["Part"][0]["ETag"] == md5_etag(bytes([2]) * 3)


def test_list_multipart_uploads(cos: CosS3Client, bucket: str) -> None:
    ids = {
        key: cos.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"] for key in ("u/a", "u/b c", "u/d/e", "v")
    }
    second_a = cos.create_multipart_upload(Bucket=bucket, Key="u/a")["UploadId"]
    listing = cos.list_multipart_uploads(Bucket=bucket, Prefix="u/", Delimiter="/")
    assert [(u["Key"], u["UploadId"]) for u in listing["Upload"]] == [
        ("u/a", ids["u/a"]),
        ("u/a", second_a),
        ("u/b c", ids["u/b c"]),
    ]
    assert [p["Prefix"] for p in listing["CommonPrefixes"]] == ["u/d/"]
    page = cos.list_multipart_uploads(Bucket=bucket, Prefix="u/", MaxUploads=1)
    assert (page["IsTruncated"], page["NextKeyMarker"], page["NextUploadIdMarker"]) == ("true", "u/a", ids["u/a"])
    after = cos.list_multipart_uploads(
        Bucket=bucket, Prefix="u/", KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"]
    )
    assert [u["UploadId"] for u in after["Upload"]] == [second_a, ids["u/b c"], ids["u/d/e"]]


def write_random(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def test_upload_file_and_download_file(cos: CosS3Client, bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    data = write_random(src, 5 * MiB + 123)
    cos.upload_file(Bucket=bucket, Key="big/src.bin", LocalFilePath=str(src), PartSize=1, MAXThread=4, EnableMD5=True)
    head = cos.head_object(Bucket=bucket, Key="big/src.bin")
    assert head["ETag"].endswith('-6"')
    dst = tmp_path / "dst.bin"
    cos.download_file(
        Bucket=bucket,
        Key="big/src.bin",
        DestFilePath=str(dst),
        PartSize=1,
        MAXThread=4,
        EnableCRC=True,
        DumpRecordDir=str(tmp_path / "records"),
    )
    assert dst.read_bytes() == data


def test_upload_file_resumes_an_interrupted_upload(cos: CosS3Client, bucket: str, tmp_path: Path) -> None:
    """upload_file finds the earlier upload through ListMultipartUploads and keeps parts whose quoted-MD5 ETag
    matches the local bytes (tencent-cloud-api.md §0 item 15)."""
    src = tmp_path / "src.bin"
    data = write_random(src, 3 * MiB)
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="resume")["UploadId"]
    upload_parts(cos, bucket, "resume", upload_id, [data[:MiB]])
    cos.upload_file(Bucket=bucket, Key="resume", LocalFilePath=str(src), PartSize=1, MAXThread=2)
    assert cos.get_object(Bucket=bucket, Key="resume")["Body"].get_raw_stream().read() == data
    assert "Upload" not in cos.list_multipart_uploads(Bucket=bucket)


def file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as f:
        while block := f.read(8 * MiB):
            digest.update(block)
    return digest.hexdigest()


class PeakRss:
    """Samples a process's resident memory (VmRSS) in the background."""

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for line in self.status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            time.sleep(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow
def test_one_gigabyte_object_keeps_memory_bounded(
    cos: CosS3Client, bucket: str, emulator: EmulatorProcess, tmp_path: Path
) -> None:
    size = 1100 * MiB  # 1.1 GiB: more than any buffer, and than one 1 GiB page of anything
    src = tmp_path / "huge.bin"
    block = os.urandom(MiB)
    with src.open("wb") as f:
        for i in range(size // MiB):
            f.write(i.to_bytes(8, "little") + block[8:])  # no two MiB alike
    with PeakRss(emulator.process.pid) as rss:
        cos.upload_file(Bucket=bucket, Key="huge.bin", LocalFilePath=str(src), PartSize=16, MAXThread=4)
        head = cos.head_object(Bucket=bucket, Key="huge.bin")
        assert head["Content-Length"] == str(size)
        dst = tmp_path / "huge.dl"
        cos.download_file(
            Bucket=bucket,
            Key="huge.bin",
            DestFilePath=str(dst),
            PartSize=16,
            MAXThread=4,
            EnableCRC=True,
            DumpRecordDir=str(tmp_path / "records"),
        )
    assert rss.peak_kib > 0
    assert rss.peak_kib < 300 * 1024, f"emulator RSS peaked at {rss.peak_kib // 1024} MiB"
    assert file_md5(dst) == file_md5(src)


def test_a_reader_keeps_the_object_it_started_with(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    """A GET in flight still sends the parts of the object it looked up while that object is overwritten and
    deleted; the old files go once it is done."""
    parts = [b"1" * MiB, b"2" * MiB]
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    complete(cos, bucket, "k", upload_id, upload_parts(cos, bucket, "k", upload_id, parts))
    emulator.admin.inject_cos("slow_body", operation="GetObject", bytes_per_second=8 * MiB)
    stream = cos.get_object(Bucket=bucket, Key="k")["Body"].get_raw_stream()
    head = stream.read(1000)
    cos.put_object(Bucket=bucket, Key="k", Body=b"replacement")
    cos.delete_object(Bucket=bucket, Key="k")
    assert head + stream.read() == b"".join(parts)
    data_files = emulator.state_dir / "cos" / "data"
    deadline = time.monotonic() + 5
    while any(data_files.iterdir()) and time.monotonic() < deadline:  # the GET's handler ends just after its bytes
        time.sleep(0.01)
    assert not any(data_files.iterdir())
