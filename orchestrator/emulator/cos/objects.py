"""Object operations: PUT, GET (ranges), HEAD, DELETE and DELETE Multiple Objects (doc 436/7749, 7753, 7745,
7743, 8289)."""

from __future__ import annotations

from aiohttp import web

from ..errors import CosError
from . import transfer, wire
from .call import Call, bad_digest
from .storage import Body, StoredObject

# PUT Object and each part take at most 5 GB (SDK put_object docstring; doc 436/7749).
MAX_PUT_BYTES = 5 * 1024**3
# Request headers an object keeps and answers with on GET and HEAD, besides x-cos-meta-*.
_KEPT_HEADERS = (
    "Content-Type",
    "Cache-Control",
    "Content-Disposition",
    "Content-Encoding",
    "Content-Language",
    "Expires",
)
# GET Object query parameters that override a response header (doc 436/7753).
RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}
MAX_DELETE_KEYS = 1000


def stored_headers(request: web.Request) -> dict[str, str]:
    kept = {name: request.headers[name] for name in _KEPT_HEADERS if name in request.headers}
    kept.update({k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-cos-meta-")})
    return kept


async def receive_body(call: Call) -> Body:
    """The request body on disk, its Content-MD5 (if sent) verified, as COS does."""
    if "x-cos-copy-source" in call.request.headers:
        raise CosError(501, "NotImplemented", "Copying objects (x-cos-copy-source) is not implemented here.")
    if (call.request.content_length or 0) > MAX_PUT_BYTES:
        raise CosError(400, "EntityTooLarge", f"A single upload takes at most {MAX_PUT_BYTES} bytes.")
    expected = call.content_md5()
    body = await transfer.receive(call.request, call.store.new_data_path(), call.fault)
    if expected is not None and body.etag.strip('"') != expected.hex():
        body.path.unlink()
        raise bad_digest()
    return body


def _object_headers(obj: StoredObject) -> dict[str, str]:
    return {
        "Content-Type": "application/octet-stream",
        **obj.headers,
        "ETag": obj.etag,
        "Last-Modified": wire.http_date(obj.modified),
        "x-cos-hash-crc64ecma": obj.crc64,
        "Accept-Ranges": "bytes",
    }


def forbid_overwrite(call: Call, received: Body | None = None) -> None:
    """``x-cos-forbid-overwrite: true`` on PUT Object or Complete Multipart Upload: a key that exists is refused
    with 409 FileAlreadyExists and keeps its object (doc 436/7749; COS ignores the header on a versioned bucket,
    which this emulator has none of). Called with no await before the commit, so the check is the commit's."""
    if call.request.headers.get("x-cos-forbid-overwrite", "").lower() != "true":
        return
    try:
        call.store.head(call.bucket_name, call.key)
    except CosError:
        return  # no such key: written as asked
    if received is not None:
        received.path.unlink(missing_ok=True)
    raise CosError(409, "FileAlreadyExists", "The specified key already exists and x-cos-forbid-overwrite is true.")


async def put_object(call: Call) -> web.StreamResponse:
    bucket = call.bucket()
    body = await receive_body(call)
    forbid_overwrite(call, body)
    obj = call.store.put_object(bucket, call.key, body, stored_headers(call.request), call.now)
    return call.empty(headers={"ETag": obj.etag, "x-cos-hash-crc64ecma": obj.crc64})


async def get_object(call: Call) -> web.StreamResponse:
    call.bucket()
    obj = call.store.head(call.bucket_name, call.key)
    _check_if_match(call, obj)
    span = wire.parse_range(call.request.headers.get("Range"), obj.size)
    first, last = span if span is not None else (0, obj.size - 1)
    headers = {**wire.base_headers(call.request_id), **_object_headers(obj)}
    headers.update(
        {header: call.param(name) for name, header in RESPONSE_OVERRIDES.items() if name in call.request.query}
    )
    if span is not None:
        headers["Content-Range"] = f"bytes {first}-{last}/{obj.size}"
    pieces = [(call.store.data_path(data), offset, count) for data, offset, count in obj.pieces(first, last)]
    with call.store.reading(obj):  # the bytes sent are this object's, whatever commits meanwhile
        return await transfer.send(call.request, 206 if span is not None else 200, headers, pieces, call.fault)


def _check_if_match(call: Call, obj: StoredObject) -> None:
    """GET and HEAD Object's If-Match: the object only if its ETag is the one named, else 412 PreconditionFailed
    (a reader of ranges, or of what a listing showed, never gets another version's bytes)."""
    wanted = call.request.headers.get("If-Match")
    if wanted is not None and wanted.strip() not in ("*", obj.etag):
        raise CosError(412, "PreconditionFailed", "The object's ETag is not the one If-Match names.")


async def head_object(call: Call) -> web.StreamResponse:
    call.bucket()
    obj = call.store.head(call.bucket_name, call.key)
    _check_if_match(call, obj)
    return call.empty(headers={**_object_headers(obj), "Content-Length": str(obj.size)})


async def delete_object(call: Call) -> web.StreamResponse:
    call.bucket()
    call.store.delete_object(call.bucket_name, call.key)  # 204 whether or not it existed
    return call.empty(204)


async def delete_objects(call: Call) -> web.StreamResponse:
    """Non-anonymous callers need cos:DeleteObject on each key, checked one by one (doc 436/8289); a key they
    may not delete is reported in the result, the others are deleted."""
    call.bucket()
    if "Content-MD5" not in call.request.headers:
        raise CosError(400, "MissingContentMD5", "DELETE Multiple Objects needs a Content-MD5 header.")
    root = await call.read_xml()
    quiet = (wire.child_text(root, "Quiet") or "false").lower() == "true"
    keys = [wire.child_text(obj, "Key") or "" for obj in wire.children(root, "Object")]
    if not keys or len(keys) > MAX_DELETE_KEYS:
        raise CosError(400, "MalformedXML", f"Delete needs 1 to {MAX_DELETE_KEYS} <Object><Key> elements.")
    results: list[wire.Element] = []
    for key in keys:
        if not call.may("DeleteObject", key):
            results.append(
                (
                    "Error",
                    [
                        ("Key", key),
                        ("Code", "AccessDenied"),
                        ("Message", "Access Denied: cos:DeleteObject not allowed."),
                    ],
                )
            )
            continue
        call.store.delete_object(call.bucket_name, key)
        if not quiet:
            results.append(("Deleted", [("Key", key)]))
    return call.xml("DeleteResult", results)
