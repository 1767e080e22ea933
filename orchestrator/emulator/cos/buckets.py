"""Bucket operations: PUT/HEAD/DELETE Bucket, GET Bucket (ListObjects v1) and GET Service (ListBuckets)
(doc 436/7738, 7735, 7732, 7734, 8291)."""

from __future__ import annotations

import re

from aiohttp import web

from ..errors import CosError
from . import wire
from .call import Call
from .listing import paginate

# BucketName-APPID: lowercase letters, digits and hyphens, then the APPID; at most 60 characters (doc 436/13312,
# naming rules). The server routes only hosts whose first label has this shape to COS.
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9-]*-\d+")
MAX_BUCKET_NAME = 60
MAX_KEYS = 1000


def check_new_bucket(name: str, appid: str) -> None:
    """What PUT Bucket checks of a name: its shape, this account's APPID suffix, its length."""
    if BUCKET_NAME.fullmatch(name) is None:
        raise CosError(
            400, "InvalidBucketName", f"{name!r} is not BucketName-APPID (lowercase letters, digits, hyphens)."
        )
    if name.rsplit("-", 1)[-1] != appid:
        raise CosError(403, "AccessDenied", f"The APPID suffix of {name} is not this account's.")
    if len(name) > MAX_BUCKET_NAME:
        raise CosError(400, "InvalidBucketName", f"BucketName-APPID is at most {MAX_BUCKET_NAME} characters.")


async def put_bucket(call: Call) -> web.StreamResponse:
    check_new_bucket(call.bucket_name, call.appid)
    call.store.create_bucket(call.bucket_name, call.region, call.now)
    return call.empty()


async def head_bucket(call: Call) -> web.StreamResponse:
    call.bucket()
    return call.empty(headers={"x-cos-bucket-region": call.region})


async def delete_bucket(call: Call) -> web.StreamResponse:
    call.store.delete_bucket(call.bucket_name, call.region)
    return call.empty(204)


async def list_objects(call: Call) -> web.StreamResponse:
    call.bucket()
    prefix, delimiter, marker = call.param("prefix"), call.param("delimiter"), call.param("marker")
    max_keys = call.int_param("max-keys", MAX_KEYS, 1, MAX_KEYS)
    page = paginate(
        call.store.objects(call.bucket_name, prefix, marker),
        prefix=prefix,
        delimiter=delimiter,
        marker=marker,
        limit=max_keys,
    )
    owner: list[wire.Element] = [("ID", call.appid), ("DisplayName", call.appid)]
    children: list[wire.Element] = [("Name", call.bucket_name)]
    if call.param("encoding-type"):
        children.append(("EncodingType", call.param("encoding-type")))
    children += [
        ("Prefix", call.encode(prefix)),
        ("Marker", call.encode(marker)),
        ("MaxKeys", max_keys),
        ("Delimiter", delimiter),
        ("IsTruncated", wire.bool_text(page.truncated)),
    ]
    if page.truncated:  # coscmd pages on NextMarker while IsTruncated (client-recipes §4.2)
        children.append(("NextMarker", call.encode(page.next_marker)))
    children += [
        (
            "Contents",
            [
                ("Key", call.encode(obj.key)),
                ("LastModified", wire.iso_date(obj.modified)),
                ("ETag", obj.etag),
                ("Size", obj.size),
                ("Owner", owner),
                ("StorageClass", "STANDARD"),
            ],
        )
        for obj in page.entries
    ]
    children += [call.prefix_element(p) for p in page.prefixes]
    return call.xml("ListBucketResult", children)


async def list_buckets(call: Call) -> web.StreamResponse:
    buckets: list[wire.Element] = [
        (
            "Bucket",
            [
                ("Name", b.name),
                ("Location", b.region),
                ("CreationDate", wire.iso_date(b.created, millis=False)),
                ("BucketType", "cos"),
            ],
        )
        for b in call.store.buckets()
    ]
    return call.xml("ListAllMyBucketsResult", [("Owner", call.owner()), ("Buckets", buckets)])
