"""Error translation at the boundary: SDK codes to the provider's exception tree (design.md §6.5)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import tencentcloud
from qcloud_cos.cos_exception import CosClientError, CosServiceError
from requests.structures import CaseInsensitiveDict
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

from orchestrator.providers.tencent import RefreshingCredential, StaticCredential, TencentSdk, _sdk, compute, errors
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.sts import Grant, federation_token
from tests.emulator_process import EmulatorProcess

TABLES: list[tuple[tuple[str, ...], type[errors.CloudError]]] = [
    (_sdk._TRANSIENT_PREFIXES, errors.TransientError),
    (_sdk._CAPACITY_PREFIXES, errors.CapacityError),
    (_sdk._EXPIRED_PREFIXES, errors.ExpiredCredentialError),
    (_sdk._AUTH_PREFIXES, errors.AuthError),
    (_sdk._STATE_PREFIXES, errors.StateConflictError),
    (_sdk._QUOTA_PREFIXES, errors.QuotaError),
]
# Codes the provider knows that no errorcodes.py lists, and why.
UNLISTED = {
    # raised by the API 3.0 SDK itself, not answered by a service (client-recipes.md §2.4)
    "ClientNetworkError": "sdk",
    "ServerNetworkError": "sdk",
    "JSONDecodeError": "sdk",
    # a common code of API 3.0 (tencent-cloud-api.md §4.2), listed by no product
    "ServiceUnavailable": "common",
    # COS's codes (tencent-cloud-api.md §6.4): COS has no errorcodes.py
    "SlowDown": "cos",
    "RequestTimeOut": "cos",
    "TooManyBucket": "cos",
    "AccessDenied": "cos",
    "SignatureDoesNotMatch": "cos",
    "InvalidAccessKeyId": "cos",
    "ExpiredToken": "cos",
    # Terraform's provider treats it as "already terminating" (tencent-cloud-api.md §2.4); undocumented
    "InvalidInstanceState.Terminating": "undocumented",
}
REGION = "ap-guangzhou"


def sdk_codes() -> set[str]:
    files = sorted(Path(tencentcloud.__file__).parent.glob("*/v*/errorcodes.py"))
    assert len(files) >= 4, files  # cvm, vpc, sts, billing
    return {code for f in files for code in re.findall(r"^\w+ = '([\w.]+)'$", f.read_text(), re.MULTILINE)}


# -- classify ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prefixes", "kind"), TABLES, ids=[kind.__name__ for _, kind in TABLES])
def test_each_prefix_table_maps_to_its_class(prefixes: tuple[str, ...], kind: type[errors.CloudError]) -> None:
    for prefix in prefixes:
        for code in (prefix, f"{prefix}.SomethingNew"):
            assert type(_sdk.classify(code, "m")) is kind, code


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("LimitExceeded.SpotQuota", errors.QuotaError),  # a quota: no retry in that zone helps
        ("LimitExceeded.InstanceQuota", errors.QuotaError),
        ("RequestLimitExceeded.UinLimitExceeded", errors.TransientError),
        ("ResourcesSoldOut.SpecifiedInstanceType", errors.CapacityError),
        ("ResourceInsufficient.ZoneSoldOutForSpecifiedInstance", errors.CapacityError),
        ("UnsupportedOperation.InstanceStateRunning", errors.StateConflictError),
        ("InvalidAccount.InsufficientBalance", errors.QuotaError),
        ("AuthFailure.TokenFailure", errors.AuthError),
        ("UnsupportedOperation.NotSupportImportInstancesActionTimer", errors.InvalidRequestError),
        ("InvalidParameterValue", errors.InvalidRequestError),
        ("SomethingNobodyKnows", errors.InvalidRequestError),
    ],
)
def test_real_codes_land_in_their_class(code: str, kind: type[errors.CloudError]) -> None:
    assert type(_sdk.classify(code, "m")) is kind


@pytest.mark.parametrize("code", ["InvalidInstanceId.NotFound", "InvalidImageId.NotFound", "NoSuchKey", "NoSuchBucket"])
def test_not_found(code: str) -> None:
    assert type(_sdk.classify(code, "m")) is errors.NotFoundError


@pytest.mark.parametrize("code", ["AuthFailure.SecretIdNotFound", "UnauthorizedOperation.NotFound", "AccessDenied"])
def test_an_auth_error_never_says_a_resource_is_gone(code: str) -> None:
    err = _sdk.classify(code, "m")
    assert isinstance(err, errors.AuthError) and not isinstance(err, errors.NotFoundError)


@pytest.mark.parametrize("code", ["InvalidInstanceId.Malformed", "ResourceNotFoundish", "NotFound"])
def test_not_found_needs_the_suffix_or_the_no_such_prefix(code: str) -> None:
    assert type(_sdk.classify(code, "m")) is errors.InvalidRequestError


def test_an_expired_token_is_an_expired_credential_and_still_an_auth_error() -> None:
    err = _sdk.classify("ExpiredToken", "The provided token has expired.", "req-1")
    assert type(err) is errors.ExpiredCredentialError
    assert isinstance(err, errors.AuthError)
    assert (err.code, err.message, err.request_id) == ("ExpiredToken", "The provided token has expired.", "req-1")
    assert type(_sdk.classify("InvalidAccessKeyId", "m")) is errors.AuthError  # a key it does not know: not expiry


def test_every_code_the_provider_knows_is_a_real_one() -> None:
    """A prefix must be a listed code or begin some; a code compared whole must be listed; the exceptions are
    the ones in UNLISTED, which no errorcodes.py may list (else the entry is stale)."""
    listed = sdk_codes()
    prefixes = {p for table, _ in TABLES for p in table}
    whole = {_sdk._UNKNOWN_KEY_CODE, *compute._ALREADY_GONE}
    for prefix in prefixes - UNLISTED.keys():
        assert any(code.startswith(prefix) for code in listed), prefix
    for code in whole - UNLISTED.keys():
        assert code in listed, code
    assert not listed & UNLISTED.keys()
    assert UNLISTED.keys() <= prefixes | whole  # no leftovers


# -- translation of SDK exceptions ---------------------------------------------------------------------------
def test_an_api_exception_keeps_code_message_and_request_id() -> None:
    err = _sdk._translate_api(TencentCloudSDKException("ResourceInsufficient", "sold out", "req-9"))
    assert type(err) is errors.CapacityError
    assert (err.code, err.message, err.request_id) == ("ResourceInsufficient", "sold out", "req-9")


def test_an_api_exception_without_a_code_is_a_network_failure() -> None:
    err = _sdk._translate_api(TencentCloudSDKException(None, None))
    assert type(err) is errors.TransientError and err.code == "ClientNetworkError"


def cos_error(status: int, code: str | None) -> CosServiceError:
    """What cos-python-sdk-v5 raises: the error body's fields, or (no body) the response headers."""
    if code is None:
        return CosServiceError("GET", CaseInsensitiveDict({"x-cos-request-id": "req-c"}), status)
    return CosServiceError("GET", {"code": code, "message": "msg", "requestid": "req-c"}, status)


@pytest.mark.parametrize("code", ["InvalidArgument", "AccessDenied", "NoSuchKey", None])
def test_a_cos_5xx_is_transient_whatever_its_code(code: str | None) -> None:
    err = _sdk._translate_cos(cos_error(503, code))
    assert type(err) is errors.TransientError
    assert err.code == (code or "Unknown")


@pytest.mark.parametrize(("status", "code", "kind"), [
    (404, None, errors.NotFoundError),
    (404, "NoSuchResource", errors.NotFoundError),
    (404, "NoSuchBucket", errors.NotFoundError),
    (403, "ExpiredToken", errors.ExpiredCredentialError),
    (403, "AccessDenied", errors.AuthError),
    (400, "InvalidArgument", errors.InvalidRequestError),
    (409, "BucketAlreadyExists", errors.InvalidRequestError),
])
def test_a_cos_4xx_is_classified_by_its_code(status: int, code: str | None, kind: type[errors.CloudError]) -> None:
    assert type(_sdk._translate_cos(cos_error(status, code))) is kind


def test_a_404_without_a_code_reads_as_no_such_key() -> None:
    assert _sdk._translate_cos(cos_error(404, None)).code == "NoSuchKey"


def test_a_cos_client_error_is_a_network_failure() -> None:
    err = _sdk._translate_cos(CosClientError("timed out"))
    assert type(err) is errors.TransientError and err.code == "ClientNetworkError"


# -- through the real SDKs, against the emulator -------------------------------------------------------------
def connect(emulator: EmulatorProcess) -> TencentSdk:
    return TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                      emulator.appid)


def test_an_api_error_is_translated_with_its_cause(emulator: EmulatorProcess) -> None:
    emulator.admin.inject("error", service="cvm", action="DescribeZones", code="ResourceInsufficient", count=1)
    with pytest.raises(errors.CapacityError) as info:
        compute.zones(connect(emulator))
    assert info.value.code == "ResourceInsufficient" and info.value.request_id
    assert isinstance(info.value.__cause__, TencentCloudSDKException)
    assert compute.zones(connect(emulator))  # the fault fired once


def test_an_expired_token_makes_refreshing_keys_fetch_their_successor(emulator: EmulatorProcess) -> None:
    sdk = connect(emulator)
    bucket = f"cvmjob-test-{emulator.appid}"
    ObjectStore(sdk, bucket).create_bucket()
    prefix = f"p-{uuid.uuid4().hex[:6]}/"
    fetched: list[str] = []

    def fetch() -> tuple[StaticCredential, float]:
        keys = federation_token(sdk, "t", emulator.appid, [Grant(bucket, prefix, write=True)])
        fetched.append(keys.secret_id)
        return StaticCredential(keys.secret_id, keys.secret_key, keys.token), float(keys.expires_at)

    job = ObjectStore(TencentSdk(RefreshingCredential(fetch), REGION, emulator.endpoint), bucket)
    job.put_bytes(f"{prefix}x", b"x")
    emulator.admin.expire_credentials()
    with pytest.raises(errors.ExpiredCredentialError):
        job.get_bytes(f"{prefix}x")
    assert len(fetched) == 1  # not before the next call
    assert job.get_bytes(f"{prefix}x") == b"x"
    assert len(fetched) == 2 and fetched[0] != fetched[1]


def test_a_url_presigned_with_temporary_keys_carries_their_token() -> None:
    """COS refuses (403) a URL signed with temporary keys without x-cos-security-token: the bootstrap of a job
    launched on OIDC or CVM-role keys could not fetch its agent."""
    temporary = TencentSdk(StaticCredential("AKIDtmp", "key", "the-token"), "ap-guangzhou", "127.0.0.1:9", "125")
    assert "x-cos-security-token=the-token" in temporary.presigned_get_url("b-125", "k.json", 600)
    permanent = TencentSdk(StaticCredential("AKIDperm", "key"), "ap-guangzhou", "127.0.0.1:9", "125")
    assert "x-cos-security-token" not in permanent.presigned_get_url("b-125", "k.json", 600)


def test_a_listed_small_object_comes_in_one_get_and_a_replaced_one_as_it_is_now(emulator: EmulatorProcess,
                                                                                 tmp_path: Path) -> None:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint,
                     emulator.appid)
    store = ObjectStore(sdk, f"small-{uuid.uuid4().hex[:6]}-{emulator.appid}")
    store.create_bucket()
    store.put_bytes("a.bin", b"first" * 1000)
    (listed,) = store.iter_objects("a.bin")
    counted: list[int] = []
    info = store.download_file("a.bin", tmp_path / "a.bin", counted.append, listed=listed)
    assert (tmp_path / "a.bin").read_bytes() == b"first" * 1000 and sum(counted) == 5000
    assert (info.size, info.etag) == (5000, listed.etag) and info.crc64 is not None
    store.put_bytes("a.bin", b"second")  # replaced after the listing: If-Match fails, the object as it is now
    info = store.download_file("a.bin", tmp_path / "a.bin", listed=listed)
    assert (tmp_path / "a.bin").read_bytes() == b"second" and info.size == 6
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]  # no part file left behind
