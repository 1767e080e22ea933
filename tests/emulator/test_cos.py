"""COS objects and buckets through the official cos-python-sdk-v5: put, get, head, delete, ranges, metadata,
batch delete, and the errors the SDK must see (shared/reference/tencent-cloud-api.md §6)."""

from __future__ import annotations

import hashlib
import re

import pytest
from qcloud_cos import CosS3Client
from qcloud_cos.cos_exception import CosServiceError

from tests.emulator.conftest import REGION
from tests.emulator_process import EmulatorProcess

ODD_KEY = "dir/sub dir/ünï+c%de &=?#.txt"


def read(cos: CosS3Client, bucket: str, key: str, **kwargs: str) -> tuple[bytes, dict[str, str]]:
    response = cos.get_object(Bucket=bucket, Key=key, **kwargs)
    return response["Body"].get_raw_stream().read(), response


def test_put_get_head_delete_round_trip(cos: CosS3Client, bucket: str) -> None:
    put = cos.put_object(
        Bucket=bucket, Key=ODD_KEY, Body=b"hello cos", ContentType="text/plain", Metadata={"x-cos-meta-owner": "ci"}
    )
    assert put["ETag"] == '"{}"'.format(hashlib.md5(b"hello cos").hexdigest())
    assert put["x-cos-hash-crc64ecma"] == "13242225731321912570"  # client-recipes §3.5
    assert put["x-cos-request-id"]
    assert put["Server"] == "tencent-cos"

    body, got = read(cos, bucket, ODD_KEY)
    assert body == b"hello cos"
    assert got["Content-Type"] == "text/plain"
    assert got["x-cos-meta-owner"] == "ci"
    assert got["ETag"] == put["ETag"]
    assert got["Content-Length"] == "9"
    assert re.fullmatch(r"\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT", got["Last-Modified"])

    head = cos.head_object(Bucket=bucket, Key=ODD_KEY)
    for name in ("Content-Length", "ETag", "Last-Modified", "x-cos-hash-crc64ecma", "Content-Type", "x-cos-meta-owner"):
        assert head[name] == got[name]
    assert cos.object_exists(Bucket=bucket, Key=ODD_KEY)

    cos.delete_object(Bucket=bucket, Key=ODD_KEY)
    assert not cos.object_exists(Bucket=bucket, Key=ODD_KEY)
    cos.delete_object(Bucket=bucket, Key=ODD_KEY)  # deleting what is gone is fine (204)


def test_overwrite_replaces_bytes_and_metadata(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="k", Body=b"first", Metadata={"x-cos-meta-v": "1"})
    cos.put_object(Bucket=bucket, Key="k", Body=b"second version")
    body, got = read(cos, bucket, "k")
    assert body == b"second version"
    assert "x-cos-meta-v" not in got
    assert got["Content-Type"] == "application/octet-stream"


def test_empty_object(cos: CosS3Client, bucket: str) -> None:
    put = cos.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert put["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    assert put["x-cos-hash-crc64ecma"] == "0"
    assert read(cos, bucket, "empty")[0] == b""


@pytest.mark.parametrize(
    ("header", "expected", "content_range"),
    [
        ("bytes=2-5", b"2345", "bytes 2-5/10"),
        ("bytes=7-", b"789", "bytes 7-9/10"),
        ("bytes=-3", b"789", "bytes 7-9/10"),
        ("bytes=8-100", b"89", "bytes 8-9/10"),
        ("bytes=-50", b"0123456789", "bytes 0-9/10"),
    ],
)
def test_ranged_get(cos: CosS3Client, bucket: str, header: str, expected: bytes, content_range: str) -> None:
    cos.put_object(Bucket=bucket, Key="digits", Body=b"0123456789")
    body, got = read(cos, bucket, "digits", Range=header)
    assert body == expected
    assert got["Content-Range"] == content_range
    assert got["Content-Length"] == str(len(expected))
    # The CRC stays the whole object's: download_file compares it after joining the ranges.
    assert got["x-cos-hash-crc64ecma"] == cos.head_object(Bucket=bucket, Key="digits")["x-cos-hash-crc64ecma"]


def test_unsatisfiable_range_is_416(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="digits", Body=b"0123456789")
    with pytest.raises(CosServiceError) as info:
        cos.get_object(Bucket=bucket, Key="digits", Range="bytes=10-")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (416, "InvalidRange")


def test_if_match_gets_the_named_version_or_412(cos: CosS3Client, bucket: str) -> None:
    etag = cos.put_object(Bucket=bucket, Key="v", Body=b"one")["ETag"]
    assert cos.get_object(Bucket=bucket, Key="v", IfMatch=etag)["Body"].get_raw_stream().read() == b"one"
    cos.put_object(Bucket=bucket, Key="v", Body=b"two")
    for call in (cos.get_object, cos.head_object):
        with pytest.raises(CosServiceError) as refused:
            call(Bucket=bucket, Key="v", IfMatch=etag)
        assert refused.value.get_status_code() == 412
    with pytest.raises(CosServiceError) as refused:
        cos.get_object(Bucket=bucket, Key="v", IfMatch=etag)
    assert refused.value.get_error_code() == "PreconditionFailed"


def test_response_header_overrides(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="report.csv", Body=b"a,b\n", ContentType="text/csv")
    _, got = read(
        cos, bucket, "report.csv", ResponseContentDisposition="attachment; filename=r.csv", ResponseContentType="x/y"
    )
    assert got["Content-Disposition"] == "attachment; filename=r.csv"
    assert got["Content-Type"] == "x/y"


def test_content_md5_is_verified(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="checked", Body=b"payload", EnableMD5=True)
    with pytest.raises(CosServiceError) as info:
        cos.put_object(Bucket=bucket, Key="bad", Body=b"payload", ContentMD5="XrY7u+Ae7tCTyyK7j1rNww==")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (400, "BadDigest")
    with pytest.raises(CosServiceError) as info:
        cos.put_object(Bucket=bucket, Key="bad", Body=b"payload", ContentMD5="not base64!")
    assert info.value.get_error_code() == "InvalidDigest"
    assert not cos.object_exists(Bucket=bucket, Key="bad")


def test_missing_key_and_bucket(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    with pytest.raises(CosServiceError) as info:
        cos.get_object(Bucket=bucket, Key="nope")
    err = info.value
    assert (err.get_status_code(), err.get_error_code()) == (404, "NoSuchKey")
    assert err.get_request_id()
    assert err.get_resource_location() == f"{bucket}.cos.{REGION}.myqcloud.com/nope"
    with pytest.raises(CosServiceError) as info:
        cos.get_object(Bucket=f"absent-{emulator.appid}", Key="k")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (404, "NoSuchBucket")
    # A HEAD error has no body: the SDK reports its own code for a 404 (tencent-cloud-api.md §0 item 13).
    with pytest.raises(CosServiceError) as info:
        cos.head_object(Bucket=bucket, Key="nope")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (404, "NoSuchResource")


def test_bucket_life_cycle(cos: CosS3Client, emulator: EmulatorProcess) -> None:
    name = f"lifecycle-{emulator.appid}"
    assert not cos.bucket_exists(Bucket=name)
    cos.create_bucket(Bucket=name)
    assert cos.bucket_exists(Bucket=name)
    assert name in [b["Name"] for b in cos.list_buckets()["Buckets"]["Bucket"]]
    with pytest.raises(CosServiceError) as info:
        cos.create_bucket(Bucket=name)
    assert (info.value.get_status_code(), info.value.get_error_code()) == (409, "BucketAlreadyExists")

    cos.put_object(Bucket=name, Key="keep", Body=b"x")
    with pytest.raises(CosServiceError) as info:
        cos.delete_bucket(Bucket=name)
    assert (info.value.get_status_code(), info.value.get_error_code()) == (409, "BucketNotEmpty")
    cos.delete_object(Bucket=name, Key="keep")
    cos.delete_bucket(Bucket=name)
    assert not cos.bucket_exists(Bucket=name)


def test_bucket_of_another_account_is_refused(cos: CosS3Client) -> None:
    with pytest.raises(CosServiceError) as info:
        cos.create_bucket(Bucket="theirs-1259999999")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (403, "AccessDenied")


def test_list_buckets_shape(cos: CosS3Client, bucket: str, emulator: EmulatorProcess) -> None:
    listing = cos.list_buckets()
    assert listing["Owner"]["DisplayName"]
    (entry,) = listing["Buckets"]["Bucket"]
    assert entry["Name"] == bucket
    assert entry["Location"] == REGION
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["CreationDate"])


def test_delete_multiple_objects(cos: CosS3Client, bucket: str) -> None:
    for key in ("a", "b", "c"):
        cos.put_object(Bucket=bucket, Key=key, Body=key.encode())
    verbose = cos.delete_objects(Bucket=bucket, Delete={"Object": [{"Key": "a"}, {"Key": "missing"}]})
    assert sorted(d["Key"] for d in verbose["Deleted"]) == ["a", "missing"]
    quiet = cos.delete_objects(Bucket=bucket, Delete={"Quiet": "true", "Object": [{"Key": "b"}, {"Key": "c"}]})
    assert "Deleted" not in quiet or not quiet["Deleted"]
    assert cos.list_objects(Bucket=bucket).get("Contents", []) == []


def test_unimplemented_subresource_does_not_touch_the_object(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="k", Body=b"data")
    with pytest.raises(CosServiceError) as info:
        cos.put_object_acl(Bucket=bucket, Key="k", ACL="private")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (501, "NotImplemented")
    assert read(cos, bucket, "k")[0] == b"data"


def test_key_too_long(cos: CosS3Client, bucket: str) -> None:
    with pytest.raises(CosServiceError) as info:
        cos.put_object(Bucket=bucket, Key="k" * 851, Body=b"x")
    assert (info.value.get_status_code(), info.value.get_error_code()) == (400, "KeyTooLong")
