"""Multipart uploads: Initiate, Upload Part, Complete, Abort, List Parts, List Multipart Uploads
(doc 436/7746, 7750, 7742, 7740, 7747, 7736).

A multipart object's ETag is the MD5 of its parts' binary MD5s followed by ``-<parts>`` (doc 436/43863 example),
its CRC-64 the parts' CRCs combined, its bytes the part files themselves: Complete reads and copies nothing.
"""

from __future__ import annotations

import hashlib
import itertools

from aiohttp import web

import crc64ecma

from ..errors import CosError
from . import wire
from .call import Call
from .listing import paginate
from .objects import forbid_overwrite, receive_body, stored_headers
from .storage import Part, Segment, StoredObject, Upload

MAX_PART_NUMBER = 10_000
# Every part but the last is at least 1 MB (doc 436/7750); the SDKs' smallest PartSize is 1 MiB.
MIN_PART_BYTES = 1 << 20
MAX_LISTED = 1000


def _upload(call: Call) -> Upload:
    call.bucket()
    return call.store.upload(call.bucket_name, call.key, call.param("uploadId"))


async def initiate(call: Call) -> web.StreamResponse:
    call.bucket()
    upload = call.store.create_upload(call.bucket_name, call.key, stored_headers(call.request), call.now)
    return call.xml(
        "InitiateMultipartUploadResult",
        [
            ("Bucket", call.bucket_name),
            ("Key", call.key),
            ("UploadId", upload.upload_id),
        ],
    )


async def upload_part(call: Call) -> web.StreamResponse:
    if not call.param("partNumber"):
        raise CosError(400, "InvalidArgument", "Upload Part needs partNumber.")
    number = call.int_param("partNumber", 0, 1, MAX_PART_NUMBER)
    upload = _upload(call)
    body = await receive_body(call)
    part = call.store.put_part(upload, number, body, call.now)
    return call.empty(headers={"ETag": part.etag, "x-cos-hash-crc64ecma": str(part.crc64)})


def _requested_parts(call: Call, listed: list[tuple[str | None, str | None]], upload: Upload) -> list[Part]:
    """The uploaded parts a Complete request lists (``(PartNumber, ETag)`` texts), checked as COS checks them."""
    numbers: list[tuple[int, str]] = []
    for number_text, etag in listed:
        if number_text is None or not number_text.strip().isdigit() or etag is None:
            raise CosError(400, "MalformedXML", "Each <Part> needs a <PartNumber> and an <ETag>.")
        numbers.append((int(number_text), etag.strip().strip('"')))
    if not numbers:
        raise CosError(400, "MalformedXML", "CompleteMultipartUpload lists no parts.")
    if any(a[0] >= b[0] for a, b in itertools.pairwise(numbers)):
        raise CosError(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
    uploaded = {part.number: part for part in call.store.parts(upload.upload_id)}
    chosen = []
    for number, etag in numbers:
        part = uploaded.get(number)
        if part is None or part.etag.strip('"') != etag:
            raise CosError(400, "InvalidPart", f"Part {number} was not uploaded or its ETag does not match.")
        chosen.append(part)
    if any(part.size < MIN_PART_BYTES for part in chosen[:-1]):
        raise CosError(400, "EntityTooSmall", f"Every part but the last must be at least {MIN_PART_BYTES} bytes.")
    return chosen


async def complete(call: Call) -> web.StreamResponse:
    root = await call.read_xml()
    # No await from here on: the upload checked is the upload committed.
    bucket = call.bucket()
    upload = _upload(call)
    listed = [(wire.child_text(p, "PartNumber"), wire.child_text(p, "ETag")) for p in wire.children(root, "Part")]
    parts = _requested_parts(call, listed, upload)
    forbid_overwrite(call)  # the upload stays, as after any refused Complete: the client aborts or retries it
    digest = hashlib.md5(b"".join(bytes.fromhex(p.etag.strip('"')) for p in parts)).hexdigest()
    crc = 0
    for part in parts:
        crc = crc64ecma.combine(crc, part.crc64, part.size)
    obj = StoredObject(
        key=call.key,
        size=sum(p.size for p in parts),
        etag=f'"{digest}-{len(parts)}"',
        modified=call.now,
        crc64=str(crc),
        headers=upload.headers,
        segments=tuple(Segment(p.data, p.size) for p in parts),
    )
    call.store.complete_upload(bucket, upload, obj)
    response = call.xml(
        "CompleteMultipartUploadResult",
        [("Location", call.location(call.key)), ("Bucket", call.bucket_name), ("Key", call.key), ("ETag", obj.etag)],
    )
    response.headers["x-cos-hash-crc64ecma"] = obj.crc64
    return response


async def abort(call: Call) -> web.StreamResponse:
    call.store.abort_upload(_upload(call).upload_id)
    return call.empty(204)


async def list_parts(call: Call) -> web.StreamResponse:
    upload = _upload(call)
    max_parts = call.int_param("max-parts", MAX_LISTED, 1, MAX_LISTED)
    marker = call.int_param("part-number-marker", 0, 0, MAX_PART_NUMBER)
    parts = call.store.parts(upload.upload_id, after=marker, limit=max_parts + 1)
    truncated = len(parts) > max_parts
    parts = parts[:max_parts]
    children: list[wire.Element] = [("Bucket", call.bucket_name)]
    if call.param("encoding-type"):
        children.append(("Encoding-type", call.param("encoding-type")))
    children += [
        ("Key", call.encode(call.key)),
        ("UploadId", upload.upload_id),
        ("Initiator", call.owner()),
        ("Owner", call.owner()),
        ("PartNumberMarker", marker),
        *[_part_element(p) for p in parts],
        ("NextPartNumberMarker", parts[-1].number if parts else marker),
        ("StorageClass", "STANDARD"),
        ("MaxParts", max_parts),
        ("IsTruncated", wire.bool_text(truncated)),  # the SDK compares it with the string 'false'
    ]
    return call.xml("ListPartsResult", children)


async def list_uploads(call: Call) -> web.StreamResponse:
    call.bucket()
    prefix, delimiter = call.param("prefix"), call.param("delimiter")
    key_marker, upload_id_marker = call.param("key-marker"), call.param("upload-id-marker")
    max_uploads = call.int_param("max-uploads", MAX_LISTED, 1, MAX_LISTED)
    page = paginate(
        call.store.uploads(call.bucket_name, prefix, key_marker, upload_id_marker),
        prefix=prefix,
        delimiter=delimiter,
        marker=key_marker,
        limit=max_uploads,
    )
    children: list[wire.Element] = [("Bucket", call.bucket_name)]
    if call.param("encoding-type"):
        children.append(("Encoding-Type", call.param("encoding-type")))
    children += [
        ("KeyMarker", call.encode(key_marker)),
        ("UploadIdMarker", upload_id_marker),
    ]
    if page.truncated:
        children += [
            ("NextKeyMarker", call.encode(page.next_marker)),
            ("NextUploadIdMarker", page.last.upload_id if isinstance(page.last, Upload) else ""),
        ]
    children += [
        ("MaxUploads", max_uploads),
        ("IsTruncated", wire.bool_text(page.truncated)),
        ("Prefix", call.encode(prefix)),
        ("Delimiter", delimiter),
        *[_upload_element(call, u) for u in page.entries],
        *[call.prefix_element(p) for p in page.prefixes],
    ]
    return call.xml("ListMultipartUploadsResult", children)


def _part_element(part: Part) -> wire.Element:
    return (
        "Part",
        [
            ("PartNumber", part.number),
            ("LastModified", wire.iso_date(part.modified)),
            ("ETag", part.etag),
            ("Size", part.size),
        ],
    )


def _upload_element(call: Call, upload: Upload) -> wire.Element:
    return (
        "Upload",
        [
            ("Key", call.encode(upload.key)),
            ("UploadId", upload.upload_id),
            ("StorageClass", "STANDARD"),
            ("Initiator", call.owner()),
            ("Owner", call.owner()),
            ("Initiated", wire.iso_date(upload.initiated)),
        ],
    )
