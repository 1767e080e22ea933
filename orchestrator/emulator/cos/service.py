"""The COS XML API front: route a request to its operation, inject faults, authenticate, authorize, answer errors.

The server hands over requests whose Host (or absolute-form target) is ``<bucket>-<appid>.cos.<region>.myqcloud.com``
and q-signed requests to its own host (GET Service through ``ServiceDomain``). Operation names are the CAM action
names (``PutObject``, ``GetBucket`` for ListObjects, ...): policies and injected faults both match on them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from aiohttp import web

from ..clock import Clock
from ..config import EmulatorConfig
from ..connection import reset_connection
from ..errors import CosError
from ..iam import Iam
from ..runtime.faults import Faults
from . import access, buckets, multipart, objects, signing, wire
from .call import Call, Handler
from .storage import Store

log = logging.getLogger("cvmjob.emulator.cos")

# Object keys are at most 850 bytes of UTF-8 (doc 436/13324, object naming rules).
MAX_KEY_BYTES = 850


# What an operation's policy check names: the account, the bucket, the object, the listed prefix, or each key
# of a batch (checked by its handler).
Scope = Literal["service", "bucket", "object", "prefix", "keys"]


@dataclass(frozen=True)
class Route:
    action: str
    handler: Handler
    scope: Scope
    params: frozenset[str] = field(default_factory=frozenset)  # query parameters the operation understands
    streams: bool = False  # applies slow_body / reset_body faults to its body itself


def _route(action: str, handler: Handler, scope: Scope, *params: str, streams: bool = False) -> Route:
    return Route(action, handler, scope, frozenset(params), streams)


# Keyed by method, "has a key", and the subresource parameter present (doc 436/7751 API list).
_SUBRESOURCES = ("uploads", "uploadId", "delete")
ROUTES: dict[tuple[str, bool, str | None], Route] = {
    ("PUT", False, None): _route("PutBucket", buckets.put_bucket, "bucket"),
    ("HEAD", False, None): _route("HeadBucket", buckets.head_bucket, "bucket"),
    ("DELETE", False, None): _route("DeleteBucket", buckets.delete_bucket, "bucket"),
    ("GET", False, None): _route(
        "GetBucket", buckets.list_objects, "bucket", "prefix", "delimiter", "marker", "max-keys", "encoding-type"
    ),
    ("GET", False, "uploads"): _route(
        "ListMultipartUploads",
        multipart.list_uploads,
        "prefix",
        "uploads",
        "prefix",
        "delimiter",
        "key-marker",
        "upload-id-marker",
        "max-uploads",
        "encoding-type",
    ),
    ("POST", False, "delete"): _route("DeleteMultipleObjects", objects.delete_objects, "keys", "delete"),
    ("PUT", True, None): _route("PutObject", objects.put_object, "object", streams=True),
    ("PUT", True, "uploadId"): _route(
        "UploadPart", multipart.upload_part, "object", "uploadId", "partNumber", streams=True
    ),
    ("GET", True, None): _route("GetObject", objects.get_object, "object", *objects.RESPONSE_OVERRIDES, streams=True),
    ("GET", True, "uploadId"): _route(
        "ListParts", multipart.list_parts, "object", "uploadId", "max-parts", "part-number-marker", "encoding-type"
    ),
    ("HEAD", True, None): _route("HeadObject", objects.head_object, "object"),
    ("DELETE", True, None): _route("DeleteObject", objects.delete_object, "object"),
    ("DELETE", True, "uploadId"): _route("AbortMultipartUpload", multipart.abort, "object", "uploadId"),
    ("POST", True, "uploads"): _route("InitiateMultipartUpload", multipart.initiate, "object", "uploads"),
    ("POST", True, "uploadId"): _route("CompleteMultipartUpload", multipart.complete, "object", "uploadId"),
}
# GET Service: the SDK sends marker and max-keys (client-recipes §3.2); an account has few buckets, all listed.
SERVICE_ROUTE = _route("GetService", buckets.list_buckets, "service", "marker", "max-keys")


def route_for(method: str, bucket: str, key: str, query: dict[str, str]) -> Route:
    if not bucket:
        if method != "GET":
            raise _method_not_allowed()
        return SERVICE_ROUTE
    subresource = next((name for name in _SUBRESOURCES if name in query), None)
    route = ROUTES.get((method, bool(key), subresource))
    if route is None:
        raise _method_not_allowed()
    return route


def _method_not_allowed() -> CosError:
    return CosError(405, "MethodNotAllowed", "The specified method is not allowed against this resource.")


def _check_params(route: Route, query: dict[str, str]) -> None:
    """An operation we do not implement (``?acl``, ``?tagging``, ...) must not pass for a plain one: ``PUT
    /key?acl`` would otherwise overwrite the object with an empty body."""
    unknown = sorted(
        name for name in query if name not in route.params and not name.startswith("q-") and name != signing.TOKEN
    )
    if unknown:
        raise CosError(501, "NotImplemented", f"{route.action} with {', '.join(unknown)} is not implemented here.")


class Cos:
    def __init__(self, root: Path, iam: Iam, config: EmulatorConfig, clock: Clock, faults: Faults) -> None:
        self.store = Store(root)
        self._iam = iam
        self._config = config
        self._clock = clock
        self._faults = faults
        # COS bills by the request (per 10 000, by class): what each bucket was asked, by operation, since the
        # emulator started or was reset. Counted once routed, refused or not, as COS counts them.
        self.requests: Counter[tuple[str, str]] = Counter()

    def discard(self) -> None:
        """A reset: every bucket, object and upload goes, and the request counts start again."""
        self.store.discard()
        self.requests.clear()

    def close(self) -> None:
        self.store.close()

    async def handle(self, request: web.Request, bucket: str, region: str) -> web.StreamResponse:
        key = unquote(urlsplit(request.raw_path).path)[1:]
        return await self._serve(request, bucket, region, key, f"{bucket}.cos.{region}.myqcloud.com/{key}")

    async def handle_service(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "", "", "", request.headers.get("Host", ""))

    async def _serve(
        self, request: web.Request, bucket: str, region: str, key: str, resource_name: str
    ) -> web.StreamResponse:
        request_id = wire.new_request_id()
        try:
            query = dict(request.query)
            route = route_for(request.method, bucket, key, query)
            self.requests[bucket, route.action] += 1
            _check_params(route, query)
            if len(key.encode()) > MAX_KEY_BYTES:
                raise CosError(400, "KeyTooLong", f"The object key is longer than {MAX_KEY_BYTES} bytes.")
            fault = self._faults.cos_fault(route.action, bucket, key)
            if fault is not None and fault.kind == "error":
                raise CosError(fault.status, fault.code, fault.message)
            signed = signing.verify(
                request.method, request.raw_path, request.headers, self._iam.secret_for, time.time()
            )
            call = Call(
                request=request,
                store=self.store,
                bucket_name=bucket,
                region=region,
                key=key,
                request_id=request_id,
                principal=access.principal_for(self._iam, signed, self._clock.now()),
                fault=fault,
                now=self._clock.now(),
                appid=self._config.appid,
                uin=self._config.uin,
            )
            _authorize(route, call)
            response = await route.handler(call)
            if fault is not None and fault.kind == "reset_body" and not route.streams:
                reset_connection(request)  # the operation took effect; its answer is lost
            return response
        except CosError as err:
            return wire.error_response(err, request_id, resource_name, head=request.method == "HEAD")
        except ConnectionError:
            # The client left mid-body: aiohttp's way to end such a handler quietly.
            raise asyncio.CancelledError from None
        except Exception:
            log.exception("COS %s %s failed", request.method, resource_name)
            internal = CosError(500, "InternalError", "We encountered an internal error. Please try again.")
            return wire.error_response(internal, request_id, resource_name, head=request.method == "HEAD")


def _authorize(route: Route, call: Call) -> None:
    if route.scope == "keys":
        return
    if route.scope == "service":
        access.require(call.principal, route.action, "*")
        return
    # Listing a prefix is granted by access to the prefix (the cos:prefix condition of GetBucket, and the prefix
    # resource of ListMultipartUploads that upload_file calls before every multipart upload) [INF: doc 436/30580
    # grants both to prefix-scoped temporary keys].
    prefix = call.param("prefix")
    context = {"cos:prefix": prefix} if "prefix" in route.params else None
    key = {"object": call.key, "prefix": prefix}.get(route.scope, "")
    access.require(call.principal, route.action, call.resource(key), context)
