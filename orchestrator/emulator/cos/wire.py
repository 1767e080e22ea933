"""The COS XML wire format: response bodies and headers, error answers, request bodies, dates and ranges.

Header names are sent in their canonical case (``ETag``, ``Content-Length``, ``Last-Modified``) and
``x-cos-hash-crc64ecma`` in lower case: the SDK copies headers into plain dicts and looks them up case-sensitively.
XML carries no namespace: the SDK only strips four known ones (shared/reference/client-recipes.md §3.4).
"""

from __future__ import annotations

import base64
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime, timezone
from email.utils import formatdate
from typing import TypeAlias
from xml.sax.saxutils import escape

from aiohttp import web

from ..errors import CosError

XML_TYPE = "application/xml"
# An element: a leaf with text, or a container of elements.
Element: TypeAlias = tuple[str, "str | int | Sequence[Element]"]


def new_request_id() -> str:
    """Shaped like COS's: base64 of an opaque id (e.g. ``NTg4MDc5MWRfNDQyMDRlXzNiMDRf****``)."""
    return base64.b64encode(secrets.token_bytes(24)).decode()


def base_headers(request_id: str) -> dict[str, str]:
    return {"Server": "tencent-cos", "x-cos-request-id": request_id}


def render(root: str, children: Sequence[Element]) -> bytes:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n']
    _render(out, [(root, children)])
    return "".join(out).encode()


def _render(out: list[str], elements: Sequence[Element]) -> None:
    for name, value in elements:
        if isinstance(value, (str, int)):
            out.append(f"<{name}>{escape(str(value))}</{name}>")
        else:
            out.append(f"<{name}>")
            _render(out, value)
            out.append(f"</{name}>")


def xml_response(request_id: str, root: str, children: Sequence[Element]) -> web.Response:
    return web.Response(body=render(root, children), headers={**base_headers(request_id), "Content-Type": XML_TYPE})


def empty_response(request_id: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, headers={**base_headers(request_id), **(headers or {})})


def error_response(err: CosError, request_id: str, resource: str, *, head: bool) -> web.Response:
    """``<Error>`` needs Code, Message, Resource and RequestId, or the SDK reports code "Unknown"
    (tencent-cloud-api.md §0 item 13). HEAD answers carry no body."""
    headers = {**base_headers(request_id), "x-cos-trace-id": new_request_id()}
    if head:
        return web.Response(status=err.status, headers=headers)
    body = render(
        "Error",
        [
            ("Code", err.code),
            ("Message", err.message),
            ("Resource", resource),
            ("RequestId", request_id),
            ("TraceId", headers["x-cos-trace-id"]),
        ],
    )
    return web.Response(status=err.status, body=body, headers={**headers, "Content-Type": XML_TYPE})


def http_date(timestamp: float) -> str:
    """RFC 1123, as in ``Last-Modified``."""
    return formatdate(timestamp, usegmt=True)


def iso_date(timestamp: float, *, millis: bool = True) -> str:
    """ISO 8601 UTC: ``<LastModified>`` of listings has milliseconds, ``<CreationDate>`` of buckets none."""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z" if millis else "%Y-%m-%dT%H:%M:%SZ"
    )


def bool_text(value: bool) -> str:
    return "true" if value else "false"


def parse_xml(body: bytes) -> ET.Element:
    try:
        return ET.fromstring(body)
    except ET.ParseError as exc:
        raise CosError(400, "MalformedXML", f"The XML you provided was not well-formed: {exc}.") from None


def _local(tag: str) -> str:
    # S3-style clients may send a namespace; COS's own do not.
    return tag.rsplit("}", 1)[-1]


def children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == name]


def child_text(element: ET.Element, name: str) -> str | None:
    found = children(element, name)
    return (found[0].text or "") if found else None


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=a-b | a- | -n`` as (first, last) inclusive; None means the whole object.

    Syntactically invalid or multi-range headers are ignored, as RFC 9110 §14.2 allows (S3 and COS answer the
    whole object); a range that starts past the end is 416 InvalidRange."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first_text, dash, last_text = header[len("bytes=") :].strip().partition("-")
    if not dash or not (first_text or last_text) or not (first_text + last_text).isdigit():
        return None
    if not first_text:  # suffix: the last n bytes
        length = int(last_text)
        if length == 0 or size == 0:
            raise _unsatisfiable(size)
        return max(0, size - length), size - 1
    first = int(first_text)
    if last_text and int(last_text) < first:
        return None
    if first >= size:
        raise _unsatisfiable(size)
    return first, min(int(last_text), size - 1) if last_text else size - 1


def _unsatisfiable(size: int) -> CosError:
    return CosError(416, "InvalidRange", f"The requested range is not satisfiable (object size {size}).")
