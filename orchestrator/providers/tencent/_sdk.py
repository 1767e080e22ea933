"""The only module that imports the Tencent Cloud SDKs.

API 3.0 calls go through the typed per-product clients: a request model is filled from a dict with
``_deserialize`` (so a misspelt field is caught by the SDK itself), sent with the product client's method, and the
response model is turned back into a dict. COS calls go through ``CosS3Client``. Every SDK exception is translated
here, once, into ``errors`` (design.md §6.5) with the cause kept.

``endpoint`` is None for Tencent Cloud, or ``host:port`` of the local emulator: the only difference between the
two is where the requests go (shared/reference/client-recipes.md §0).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Protocol, TypeVar

import requests
import urllib3
from qcloud_cos import CosConfig, CosS3Client
from qcloud_cos.cos_exception import CosClientError, CosServiceError
from qcloud_cos.version import __version__ as _cos_sdk_version
from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile

from ...errors import CvmjobError
from . import errors
from .budget import ApiBudget
from .keys import CredentialSource, RefreshingCredential

T = TypeVar("T")

# Each product's SDK package (its client class is <Product>Client). Imported on first use: the models of the four
# took 0.4 s of CPU at every start of every process (an agent or a `cvmjob status` uses COS alone).
_PRODUCTS: dict[str, str] = {
    "cvm": "tencentcloud.cvm.v20170312",
    "vpc": "tencentcloud.vpc.v20170312",
    "sts": "tencentcloud.sts.v20180813",
    "billing": "tencentcloud.billing.v20180709",
    "tcr": "tencentcloud.tcr.v20190924",
}


@functools.cache
def _product(service: str) -> tuple[Any, ModuleType]:
    """The client class and the models module of ``service``."""
    package = _PRODUCTS[service]
    module = importlib.import_module(f"{package}.{service}_client")
    return getattr(module, f"{service.capitalize()}Client"), importlib.import_module(f"{package}.models")


def cvm_role_credential() -> CredentialSource | None:
    """The keys of the CAM role bound to this CVM (the SDK's CVMRoleCredential, refreshed from the metadata
    service), or None when the instance has no role."""
    role = credential.CVMRoleCredential()
    try:
        role.get_credential_info()
    except Exception:  # the SDK raises bare exceptions for "no role" and for an unreachable metadata service
        return None
    return role  # type: ignore[no-any-return]


_TRANSIENT_PREFIXES = (
    "ClientNetworkError",
    "ServerNetworkError",
    "RequestLimitExceeded",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
    "OperationDenied.InstanceOperationInProgress",
    "MutexOperation.TaskRunning",
    "JSONDecodeError",
    "FailedOperation.InquiryPriceFailed",
    "SlowDown",
    "RequestTimeOut",
)
_CAPACITY_PREFIXES = (
    "ResourceInsufficient",
    "ResourcesSoldOut",
    "ResourceUnavailable",
    "InvalidParameterValue.InsufficientPrice",
    "UnsupportedOperation.NoInstanceTypeSupportSpot",
    "UnsupportedOperation.SpotUnsupportedRegion",
)
# The spot quota (vCPUs per zone) among them: no retry in that zone helps until a ticket raises it.
_QUOTA_PREFIXES = (
    "LimitExceeded",
    "InstancesQuotaLimitExceeded",
    "InvalidAccount",
    "ImageQuotaLimitExceeded",
    "TooManyBucket",
)
_AUTH_PREFIXES = (
    "AuthFailure",
    "InvalidParameter.WebIdentityTokenError",  # STS refused the OIDC token that was to buy the keys
    "UnauthorizedOperation",
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "InvalidPermission",
)
_EXPIRED_PREFIXES = ("ExpiredToken",)  # COS: a temporary key's token past its expiry
# COS's answer to a key it does not know (a temporary one it has forgotten, too); with an expired token, what
# makes a RefreshingCredential fetch new keys.
_UNKNOWN_KEY_CODE = "InvalidAccessKeyId"
_USER_AGENT = f"cos-python-sdk-v{_cos_sdk_version}"  # what the SDK sends: COS sees one client either way
# COS's answer to a create-only PUT (x-cos-forbid-overwrite: true) on a key that exists (doc 436/7749).
_EXISTS_PREFIXES = ("FileAlreadyExists",)
_STATE_PREFIXES = (
    "UnsupportedOperation.InstanceState",
    "InvalidImageId.IncorrectState",
    "UnsupportedOperation.InstanceMixedPricingModel",
)


def classify(code: str, message: str, request_id: str | None = None) -> errors.CloudError:
    kinds: tuple[tuple[tuple[str, ...], type[errors.CloudError]], ...] = (
        (_TRANSIENT_PREFIXES, errors.TransientError),
        (_CAPACITY_PREFIXES, errors.CapacityError),
        (_EXPIRED_PREFIXES, errors.ExpiredCredentialError),
        (_AUTH_PREFIXES, errors.AuthError),
        (_STATE_PREFIXES, errors.StateConflictError),
        (_EXISTS_PREFIXES, errors.AlreadyExistsError),
        (_QUOTA_PREFIXES, errors.QuotaError),
    )
    for prefixes, kind in kinds:
        if code.startswith(prefixes):
            return kind(code, message, request_id)
    if code.endswith(".NotFound") or code.startswith(("NoSuch", "InvalidInstanceId.NotFound")):
        return errors.NotFoundError(code, message, request_id)
    return errors.InvalidRequestError(code, message, request_id)


def _translate_api(exc: TencentCloudSDKException) -> errors.CloudError:
    return classify(exc.get_code() or "ClientNetworkError", exc.get_message() or "", exc.get_request_id())


def _translate_cos(exc: CosServiceError | CosClientError) -> errors.CloudError:
    if isinstance(exc, CosClientError):
        return errors.TransientError("ClientNetworkError", str(exc))
    status = exc.get_status_code()
    code = exc.get_error_code() or "Unknown"
    if code in ("Unknown", "NoSuchResource") and status == 404:
        code = "NoSuchKey"
    err = classify(code, exc.get_error_msg() or str(status), exc.get_request_id())
    if status >= 500 and not isinstance(err, errors.TransientError):
        return errors.TransientError(code, err.message, err.request_id)
    return err


def read_body(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes of a COS response body. A connection that breaks mid-body (reset, timeout) is a
    transient error like any other network failure; urllib3 would otherwise raise its own ProtocolError past
    every caller's ``except CloudError`` (found by tests/faults: a reset during the data sync failed the job)."""
    try:
        data: bytes = stream.read(size)
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise errors.TransientError("IncompleteBody", f"the response body was cut short: {exc}") from exc
    return data


# Keep-alive connections to COS per TencentSdk. The SDK's own pool (one per process, sized by the first client's
# CosConfig: 10) is smaller than an agent's transfers in flight (up to 32 ranges and parts, agent/cloud.py, and its
# other calls): past it, every request beyond the tenth opened a new connection and threw it away.
COS_CONNECTIONS = 64


class Readable(Protocol):
    """A request body sent as it is read."""

    def read(self, size: int = -1) -> bytes: ...


_BLOCK = 1024 * 1024  # what cos_put reads of a body at a time


def _http_session(connections: int) -> requests.Session:
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=connections)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class TencentSdk:
    """Clients for one account, region and endpoint."""

    def __init__(
        self,
        credential: CredentialSource,
        region: str,
        endpoint: str | None = None,
        appid: str | None = None,
        timeout: float = 30.0,
        budget: ApiBudget | None = None,
        connections: int = COS_CONNECTIONS,
    ) -> None:
        self.credential = credential
        self.region = region
        self.endpoint = endpoint
        self.appid = appid
        self.budget = budget if budget is not None else ApiBudget()  # share one among connections of one account
        self._timeout = timeout
        self._clients: dict[str, Any] = {}
        self._cos: tuple[tuple[str, str, str | None], CosS3Client] | None = None
        self._cos_lock = threading.Lock()
        self._cos_http = _http_session(connections)
        self._connections = connections
        self._pools: dict[str, urllib3.PoolManager] = {}  # by host: straight, or through the proxy the env names
        self._proxies: dict[tuple[str, str], str | None] = {}  # by (scheme, host)

    def for_region(self, region: str) -> TencentSdk:
        """The same account's clients in ``region`` (COS of a bucket there), sharing the API budget."""
        if region == self.region:
            return self
        return TencentSdk(self.credential, region, self.endpoint, self.appid, self._timeout, self.budget,
                          self._connections)

    @property
    def timeout(self) -> float:
        """Seconds a request may wait for a connection or for the next bytes of its answer."""
        return self._timeout

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            client_cls, _ = _product(service)
            if self.endpoint is None:
                http = HttpProfile(reqTimeout=int(self._timeout))
            else:  # both are needed: a bare host:port defaults to https (client-recipes §2.1)
                http = HttpProfile(protocol="http", endpoint=self.endpoint, reqTimeout=int(self._timeout))
            profile = ClientProfile(httpProfile=http, language="en-US")
            self._clients[service] = client_cls(self.credential, self.region, profile)
        return self._clients[service]

    def call(self, service: str, action: str, params: dict[str, Any], *, unsigned: bool = False) -> dict[str, Any]:
        """One API 3.0 call through the typed SDK; returns the response fields as a dict. ``unsigned``: sent with
        ``Authorization: SKIP`` and without reading the keys, as the few actions that allow it may be
        (AssumeRoleWithWebIdentity)."""
        _, models = _product(service)
        request = getattr(models, f"{action}Request")()
        request._deserialize(params)
        self.budget.acquire(service, action, self.region)
        # The typed request checks the parameters; the answer is taken as the JSON it came in (the typed response
        # model, encoded again for a dict, costs a busy controller a third of its CPU).
        options = {"SkipSign": True} if unsigned else None
        try:
            answer = self._client(service).call_json(action, request._serialize(), options=options)
            result: dict[str, Any] = answer["Response"]
        except TencentCloudSDKException as exc:
            raise _translate_api(exc) from exc
        except CvmjobError:  # the keys' own source failed (a web identity refused), already said in our terms
            raise
        except Exception as exc:  # what the typed methods do with anything else (a body that is not JSON)
            raise _translate_api(TencentCloudSDKException(type(exc).__name__, str(exc))) from exc
        return result

    # -- COS -------------------------------------------------------------------------------------------
    def cos(self) -> CosS3Client:
        """A COS client for the current keys. cos-python-sdk-v5 signs with a CredentialInstance's keys but sends
        ``x-cos-security-token`` only from ``CosConfig(Token=...)``, so a client is built per set of keys (read
        together, so a refresh never mixes an old token with new keys); calls in flight keep theirs."""
        keys = self.credential.get_credential_info()
        with self._cos_lock:
            if self._cos is None or self._cos[0] != keys:
                self._cos = (keys, CosS3Client(self._cos_config(keys, ip_mode=True), retry=0, session=self._cos_http))
            return self._cos[1]

    def _cos_config(self, keys: tuple[str, str, str | None], ip_mode: bool) -> CosConfig:
        secret_id, secret_key, token = keys
        kwargs: dict[str, Any] = {
            "Region": self.region,
            "SecretId": secret_id,
            "SecretKey": secret_key,
            "Token": token,
            "Timeout": int(self._timeout),
        }
        if self.endpoint is None:
            kwargs["Scheme"] = "https"
        else:
            host, port = self.endpoint.rsplit(":", 1)
            kwargs["Scheme"] = "http"
            if ip_mode:
                kwargs.update(IP=host, Port=int(port), ServiceDomain=self.endpoint)
        return CosConfig(**kwargs)

    def cos_call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.cos(), method)(**kwargs)
        except (CosServiceError, CosClientError) as exc:
            raise self._cos_error(exc) from exc

    def _cos_error(self, exc: CosServiceError | CosClientError) -> errors.CloudError:
        error = _translate_cos(exc)
        rejected = isinstance(error, errors.ExpiredCredentialError) or error.code == _UNKNOWN_KEY_CODE
        if rejected and isinstance(self.credential, RefreshingCredential):
            self.credential.rejected()
        return error

    def cos_request(self, method: str, bucket: str, key: str, headers: dict[str, str],
                    params: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
        """The URL and the headers of a request on one object (GET, PUT), signed as the SDK's own calls sign it:
        the SDK's URL scheme, host and key quoting, and q-sign over the method, the Host header, the key and
        ``params`` (in the URL's query; the other headers go unsigned, as COS allows)."""
        client = self.cos()
        conf = client._conf  # the client's own CosConfig, not a copy
        # The bucket's domain, also in the IP mode of _cos_config (the URL names the emulator's address).
        sent = {**headers, "User-Agent": _USER_AGENT, "Host": conf.get_host(Bucket=bucket)}
        sent["Authorization"] = client.get_auth(Method=method, Bucket=bucket, Key=key, Headers={"Host": sent["Host"]},
                                                Params=params or {})
        if conf._token is not None:
            sent["x-cos-security-token"] = conf._token
        url = conf.uri(bucket=bucket, path=key)
        return (url + "?" + urllib.parse.urlencode(params) if params else url), sent

    def cos_http_error(self, status: int, body: bytes, method: str) -> errors.CloudError:
        """A COS error answer (its HTTP status and XML body) in our terms, as the SDK's calls translate it."""
        return self._cos_error(CosServiceError(method, body.decode(errors="replace"), status))

    def cos_network_error(self, exc: BaseException) -> errors.CloudError:
        """A COS request that failed on the network (refused, reset, timed out), in our terms."""
        return self._cos_error(CosClientError(str(exc) or type(exc).__name__))

    @contextlib.contextmanager
    def cos_get(self, bucket: str, key: str, headers: dict[str, str]) -> Iterator[tuple[dict[str, str], Any]]:
        """GET one object: (its response headers, its body as a stream for ``read_body``), sent through urllib3
        with ``cos_request``'s URL and headers. ``get_object`` spent about 1.7 ms of CPU an object in the
        client (requests looks for proxies in the environment at every request, the SDK formats log lines it
        does not print), this about 0.7 ms (benchmarks/sync_throughput.py). The body must be read to its end
        inside the block."""
        url, sent = self.cos_request("GET", bucket, key, headers)
        response = self._cos_send("GET", url, sent, preload_content=False)
        try:
            yield dict(response.headers), response
        except BaseException:
            response.close()  # the body may be half read: the connection cannot serve another request
            raise
        response.release_conn()

    def cos_put(self, bucket: str, key: str, params: dict[str, str], body: Readable, length: int) -> dict[str, str]:
        """PUT ``length`` bytes of ``body`` (read as they are sent: no more of it in memory than a block) with
        ``cos_request``'s URL and signature; the response headers. A part of a multipart upload through the SDK
        held the whole part in memory, 16 MiB for each request in flight."""
        url, sent = self.cos_request("PUT", bucket, key, {"Content-Length": str(length)}, params)
        return dict(self._cos_send("PUT", url, sent, body=body).headers)

    def _cos_send(self, method: str, url: str, headers: dict[str, str], **options: Any) -> urllib3.BaseHTTPResponse:
        """One request of ``cos_get``/``cos_put`` through the host's keep-alive pool; a network failure or an error
        answer comes out as a CloudError (the connection of an error answer is closed)."""
        try:
            response = self._pool(url).urlopen(method, url, headers=headers, retries=False, redirect=False,
                                               timeout=self._timeout, **options)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self.cos_network_error(exc) from exc
        if response.status >= 400:
            error = self.cos_http_error(response.status, response.data, method)
            response.close()
            raise error
        return response

    def cos_proxy(self, url: str) -> str | None:
        """The proxy a request to ``url`` goes through: the one the environment names for its scheme, unless its
        host is exempt (urllib's rules, as requests applies them). Looked up once a host: the environment's scan
        was a tenth of a small-object sync's CPU."""
        parsed = urllib3.util.parse_url(url)
        where = (parsed.scheme or "http", parsed.host or "")
        if where not in self._proxies:
            self._proxies[where] = (None if urllib.request.proxy_bypass(where[1])
                                    else urllib.request.getproxies().get(where[0]))
        return self._proxies[where]

    def _pool(self, url: str) -> urllib3.PoolManager:
        """The connection pool for ``url``'s host, through its proxy (cos_proxy), looked up once a host rather
        than once a request."""
        host = urllib3.util.parse_url(url).host or ""
        with self._cos_lock:
            if host not in self._pools:
                proxy = self.cos_proxy(url)
                # A streamed body (cos_put) goes in blocks of a MiB, not urllib3's 16 KiB: 64 times fewer reads.
                self._pools[host] = (urllib3.ProxyManager(proxy, maxsize=self._connections, blocksize=_BLOCK) if proxy
                                     else urllib3.PoolManager(maxsize=self._connections, blocksize=_BLOCK))
            return self._pools[host]

    def presigned_get_url(self, bucket: str, key: str, expires_seconds: int) -> str:
        """A URL on the bucket's real domain (``<bucket>.cos.<region>.myqcloud.com``). On the emulator an
        instance reaches that host through the proxy the emulator hands it; over plain http there."""
        keys = self.credential.get_credential_info()
        client = CosS3Client(self._cos_config(keys, ip_mode=False), retry=0)
        # Signed with temporary keys (a web identity, a CVM role), COS wants their token in the URL too: the SDK
        # leaves it out, and the instance's bootstrap got 403. Such a URL also lapses with those keys.
        params = {"x-cos-security-token": keys[2]} if keys[2] else {}
        url: str = client.get_presigned_download_url(Bucket=bucket, Key=key, Expired=expires_seconds, Params=params)
        return url
