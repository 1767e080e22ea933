"""Who may call COS: q-sign signatures (header and presigned), temporary credentials from STS with their CAM
policy enforced per operation, and the request forms the clients send (IP mode, proxies, absolute-form targets)."""

from __future__ import annotations

import json
import time
from typing import Any
from unittest import mock
from urllib.parse import quote

import pytest
import requests
from qcloud_cos import CosConfig, CosS3Client
from qcloud_cos.cos_exception import CosServiceError
from tencentcloud.sts.v20180813 import models as sts_models

from tests.emulator.conftest import REGION, make_cos
from tests.emulator_process import EmulatorProcess


def code(info: pytest.ExceptionInfo[CosServiceError]) -> tuple[int, str]:
    return info.value.get_status_code(), info.value.get_error_code()


def bucket_host(bucket: str) -> str:
    return f"{bucket}.cos.{REGION}.myqcloud.com"


def proxy_client(emulator: EmulatorProcess, **credentials: str) -> CosS3Client:
    """The SDK with the emulator as its HTTP proxy: absolute-form targets on the real bucket host."""
    conf = CosConfig(
        Region=REGION,
        SecretId=credentials.get("secret_id", emulator.secret_id),
        SecretKey=credentials.get("secret_key", emulator.secret_key),
        Scheme="http",
        Proxies={"http": f"http://{emulator.endpoint}"},
    )
    return CosS3Client(conf, retry=0)


def test_wrong_secret_key(emulator: EmulatorProcess, bucket: str) -> None:
    with pytest.raises(CosServiceError) as info:
        make_cos(emulator, secret_key="not-the-key").get_object(Bucket=bucket, Key="k")
    assert code(info) == (403, "SignatureDoesNotMatch")


def test_unknown_secret_id(emulator: EmulatorProcess, bucket: str) -> None:
    with pytest.raises(CosServiceError) as info:
        make_cos(emulator, secret_id="AKIDunknown000000000000000000000000").get_object(Bucket=bucket, Key="k")
    assert code(info) == (403, "InvalidAccessKeyId")


def test_expired_signature_time(cos: CosS3Client, bucket: str) -> None:
    signed_long_ago = time.time() - 20_000  # the SDK signs now-60 .. now+10000
    with (
        mock.patch("qcloud_cos.cos_auth.time.time", return_value=signed_long_ago),
        pytest.raises(CosServiceError) as info,
    ):
        cos.get_object(Bucket=bucket, Key="k")
    assert code(info) == (403, "AccessDenied")
    assert "Request has expired" in info.value.get_error_msg()


def test_unsigned_request_is_denied(emulator: EmulatorProcess, bucket: str) -> None:
    response = requests.get(f"http://{emulator.endpoint}/k", headers={"Host": bucket_host(bucket)}, timeout=10)
    assert response.status_code == 403
    assert "<Code>AccessDenied</Code>" in response.text
    assert response.headers["Content-Type"] == "application/xml"


# -- temporary credentials -------------------------------------------------------------------------------------
def job_policy(emulator: EmulatorProcess, bucket: str, prefix: str) -> dict[str, Any]:
    """The prefix-scoped policy of doc 436/30580 (tencent-cloud-api.md §7)."""
    base = f"qcs::cos:{REGION}:uid/{emulator.appid}:{bucket}/"
    return {
        "version": "2.0",
        "statement": [
            {
                "effect": "allow",
                "action": [
                    "name/cos:PutObject",
                    "name/cos:InitiateMultipartUpload",
                    "name/cos:ListMultipartUploads",
                    "name/cos:ListParts",
                    "name/cos:UploadPart",
                    "name/cos:CompleteMultipartUpload",
                    "name/cos:AbortMultipartUpload",
                    "name/cos:GetObject",
                    "name/cos:HeadObject",
                    "name/cos:DeleteObject",
                ],
                "resource": [f"{base}{prefix}*"],
            },
            {
                "effect": "allow",
                "action": ["name/cos:GetBucket"],
                "resource": [f"{base}*"],
                "condition": {"string_like": {"cos:prefix": f"{prefix}*"}},
            },
        ],
    }


def federation_token(sts: Any, policy: dict[str, Any]) -> Any:
    request = sts_models.GetFederationTokenRequest()
    request.Name = "jobA"
    request.Policy = quote(json.dumps(policy))  # the API wants it url-encoded (§7)
    request.DurationSeconds = 1800
    return sts.GetFederationToken(request).Credentials


@pytest.fixture
def job_cos(emulator: EmulatorProcess, bucket: str, sts: Any) -> CosS3Client:
    creds = federation_token(sts, job_policy(emulator, bucket, "cvmjob/job-a/"))
    return make_cos(emulator, creds.TmpSecretId, creds.TmpSecretKey, creds.Token)


def test_scoped_token_works_inside_its_prefix(job_cos: CosS3Client, bucket: str, tmp_path: Any) -> None:
    job_cos.put_object(Bucket=bucket, Key="cvmjob/job-a/status.json", Body=b"{}")
    assert job_cos.get_object(Bucket=bucket, Key="cvmjob/job-a/status.json")["Body"].get_raw_stream().read() == b"{}"
    assert job_cos.head_object(Bucket=bucket, Key="cvmjob/job-a/status.json")["Content-Length"] == "2"
    listing = job_cos.list_objects(Bucket=bucket, Prefix="cvmjob/job-a/")
    assert [c["Key"] for c in listing["Contents"]] == ["cvmjob/job-a/status.json"]
    # upload_file lists multipart uploads under the key first, then uploads in parts.
    src = tmp_path / "ckpt.bin"
    src.write_bytes(b"c" * (2 * 1024 * 1024 + 5))
    job_cos.upload_file(Bucket=bucket, Key="cvmjob/job-a/ckpt.bin", LocalFilePath=str(src), PartSize=1)
    job_cos.delete_object(Bucket=bucket, Key="cvmjob/job-a/status.json")


def test_scoped_token_is_denied_outside_its_prefix(job_cos: CosS3Client, cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="cvmjob/job-b/secret", Body=b"b's")
    attempts = {
        "put": lambda: job_cos.put_object(Bucket=bucket, Key="cvmjob/job-b/x", Body=b"x"),
        "get": lambda: job_cos.get_object(Bucket=bucket, Key="cvmjob/job-b/secret"),
        "list": lambda: job_cos.list_objects(Bucket=bucket, Prefix="cvmjob/job-b/"),
        "list-all": lambda: job_cos.list_objects(Bucket=bucket),
        "delete": lambda: job_cos.delete_object(Bucket=bucket, Key="cvmjob/job-b/secret"),
        "initiate": lambda: job_cos.create_multipart_upload(Bucket=bucket, Key="cvmjob/job-b/big"),
        "buckets": job_cos.list_buckets,
        "create-bucket": lambda: job_cos.create_bucket(Bucket=f"other-{bucket.rsplit('-', 1)[1]}"),
    }
    for name, attempt in attempts.items():
        with pytest.raises(CosServiceError) as info:
            attempt()
        assert code(info) == (403, "AccessDenied"), name
    assert cos.object_exists(Bucket=bucket, Key="cvmjob/job-b/secret")


def test_batch_delete_checks_each_key(job_cos: CosS3Client, cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="cvmjob/job-a/mine", Body=b"a")
    cos.put_object(Bucket=bucket, Key="cvmjob/job-b/theirs", Body=b"b")
    result = job_cos.delete_objects(
        Bucket=bucket, Delete={"Object": [{"Key": "cvmjob/job-a/mine"}, {"Key": "cvmjob/job-b/theirs"}]}
    )
    assert [d["Key"] for d in result["Deleted"]] == ["cvmjob/job-a/mine"]
    assert [(e["Key"], e["Code"]) for e in result["Error"]] == [("cvmjob/job-b/theirs", "AccessDenied")]
    assert cos.object_exists(Bucket=bucket, Key="cvmjob/job-b/theirs")


def test_temporary_key_needs_its_token(emulator: EmulatorProcess, bucket: str, sts: Any) -> None:
    creds = federation_token(sts, job_policy(emulator, bucket, "cvmjob/job-a/"))
    for token in (None, "not-the-token"):
        client = make_cos(emulator, creds.TmpSecretId, creds.TmpSecretKey, token)
        with pytest.raises(CosServiceError) as info:
            client.get_object(Bucket=bucket, Key="cvmjob/job-a/x")
        assert code(info) == (403, "AccessDenied")


def test_expired_token(emulator: EmulatorProcess, job_cos: CosS3Client, bucket: str) -> None:
    job_cos.put_object(Bucket=bucket, Key="cvmjob/job-a/x", Body=b"x")
    emulator.admin.expire_credentials()
    with pytest.raises(CosServiceError) as info:
        job_cos.get_object(Bucket=bucket, Key="cvmjob/job-a/x")
    assert code(info) == (403, "ExpiredToken")


# -- presigned URLs and request forms ------------------------------------------------------------------------
def test_presigned_get_and_put_in_ip_mode(emulator: EmulatorProcess, cos: CosS3Client, bucket: str) -> None:
    """In IP mode the URL loses the bucket, so the Host header is signed and sent (client-recipes §3.5)."""
    host = {"Host": bucket_host(bucket)}
    put_url = cos.get_presigned_url(Bucket=bucket, Key="pre/up load.txt", Method="PUT", Headers=host)
    assert requests.put(put_url, data=b"via presigned PUT", headers=host, timeout=10).status_code == 200
    get_url = cos.get_presigned_download_url(Bucket=bucket, Key="pre/up load.txt", Headers=host)
    response = requests.get(get_url, headers=host, timeout=10)
    assert (response.status_code, response.content) == (200, b"via presigned PUT")
    tampered = get_url.replace("pre/up%20load.txt", "pre/other.txt")
    assert requests.get(tampered, headers=host, timeout=10).status_code == 403


def test_presigned_url_through_the_proxy(emulator: EmulatorProcess, cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="pre/k", Body=b"proxied")
    proxies = {"http": f"http://{emulator.endpoint}"}
    url = proxy_client(emulator).get_presigned_download_url(Bucket=bucket, Key="pre/k", Expired=60)
    assert url.startswith(f"http://{bucket_host(bucket)}/pre/k?")
    assert requests.get(url, proxies=proxies, timeout=10).content == b"proxied"
    with mock.patch("qcloud_cos.cos_auth.time.time", return_value=time.time() - 3600):
        stale = proxy_client(emulator).get_presigned_download_url(Bucket=bucket, Key="pre/k", Expired=60)
    response = requests.get(stale, proxies=proxies, timeout=10)
    assert response.status_code == 403
    assert "Request has expired" in response.text


def test_presigned_url_with_temporary_credentials(
    emulator: EmulatorProcess, cos: CosS3Client, bucket: str, sts: Any
) -> None:
    cos.put_object(Bucket=bucket, Key="cvmjob/job-a/data", Body=b"scoped")
    creds = federation_token(sts, job_policy(emulator, bucket, "cvmjob/job-a/"))
    client = make_cos(emulator, creds.TmpSecretId, creds.TmpSecretKey, creds.Token)
    host = {"Host": bucket_host(bucket)}
    url = client.get_presigned_download_url(
        Bucket=bucket, Key="cvmjob/job-a/data", Headers=host, Params={"x-cos-security-token": creds.Token}
    )
    assert requests.get(url, headers=host, timeout=10).content == b"scoped"


def test_proxy_mode_client(emulator: EmulatorProcess, bucket: str) -> None:
    """coscmd's way in: absolute-form targets through HTTP_PROXY, host signed without a port."""
    client = proxy_client(emulator)
    client.put_object(Bucket=bucket, Key="p/x", Body=b"absolute")
    assert client.get_object(Bucket=bucket, Key="p/x")["Body"].get_raw_stream().read() == b"absolute"
    assert [c["Key"] for c in client.list_objects(Bucket=bucket, Prefix="p/")["Contents"]] == ["p/x"]
    assert bucket in [b["Name"] for b in client.list_buckets()["Buckets"]["Bucket"]]


def test_ip_mode_client_through_a_proxy(emulator: EmulatorProcess, bucket: str) -> None:
    """The target names 127.0.0.1 while Host names the bucket: Host wins."""
    conf = CosConfig(
        Region=REGION,
        SecretId=emulator.secret_id,
        SecretKey=emulator.secret_key,
        Scheme="http",
        IP="127.0.0.1",
        Port=emulator.port,
        Proxies={"http": f"http://{emulator.endpoint}"},
    )
    client = CosS3Client(conf, retry=0)
    client.put_object(Bucket=bucket, Key="ip/x", Body=b"both")
    assert client.get_object(Bucket=bucket, Key="ip/x")["Body"].get_raw_stream().read() == b"both"
