"""PUT Object and Complete Multipart Upload with ``x-cos-forbid-overwrite: true``: a key that exists answers
409 FileAlreadyExists and keeps its object, as COS does (doc 436/7749, 436/7742); a new key is written. The
checkpoint manifest's generations rely on it (issue 27, item 1)."""

from __future__ import annotations

import pytest
from qcloud_cos import CosS3Client
from qcloud_cos.cos_exception import CosServiceError

from tests.emulator.test_cos_multipart import MiB, upload_parts

FORBID = {"x-cos-forbid-overwrite": "true"}  # the SDK passes Metadata's headers as they are


def body(cos: CosS3Client, bucket: str, key: str) -> bytes:
    return bytes(cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read())


def test_put_object_forbidden_to_overwrite_leaves_the_object_as_it_was(cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="m/1.json", Body=b"first", Metadata=FORBID)  # a new key: written
    with pytest.raises(CosServiceError) as refused:
        cos.put_object(Bucket=bucket, Key="m/1.json", Body=b"second", Metadata=FORBID)
    assert (refused.value.get_status_code(), refused.value.get_error_code()) == (409, "FileAlreadyExists")
    assert body(cos, bucket, "m/1.json") == b"first"
    cos.put_object(Bucket=bucket, Key="m/1.json", Body=b"third", Metadata={"x-cos-forbid-overwrite": "false"})
    cos.put_object(Bucket=bucket, Key="m/1.json", Body=b"fourth")  # without the header: overwritten as always
    assert body(cos, bucket, "m/1.json") == b"fourth"


def test_complete_multipart_forbidden_to_overwrite_leaves_the_object_as_it_was(cos: CosS3Client,
                                                                                bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="mp/big.bin", Body=b"already here")
    upload_id = cos.create_multipart_upload(Bucket=bucket, Key="mp/big.bin")["UploadId"]
    listed = upload_parts(cos, bucket, "mp/big.bin", upload_id, [b"a" * MiB, b"tail"])
    with pytest.raises(CosServiceError) as refused:
        cos.complete_multipart_upload(Bucket=bucket, Key="mp/big.bin", UploadId=upload_id,
                                      MultipartUpload={"Part": listed}, Metadata=FORBID)
    assert (refused.value.get_status_code(), refused.value.get_error_code()) == (409, "FileAlreadyExists")
    assert body(cos, bucket, "mp/big.bin") == b"already here"
