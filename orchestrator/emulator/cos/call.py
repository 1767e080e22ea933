"""One authenticated COS request as the operation handlers see it."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote
from xml.etree.ElementTree import Element as XmlElement

from aiohttp import web

from ..errors import CosError
from ..iam import Principal
from ..runtime.faults import CosFault
from . import access, wire
from .storage import Bucket, Store

# The longest XML request body we read (CompleteMultipartUpload lists at most 10 000 parts, about 1 MB).
MAX_XML_BODY = 4 << 20


@dataclass(frozen=True)
class Call:
    request: web.Request
    store: Store
    bucket_name: str
    region: str
    key: str
    request_id: str
    principal: Principal
    fault: CosFault | None
    now: float  # the cloud clock when the request arrived: object times follow emulated time
    appid: str
    uin: str

    def param(self, name: str, default: str = "") -> str:
        return self.request.query.get(name, default)

    def int_param(self, name: str, default: int, low: int, high: int) -> int:
        text = self.param(name)
        if not text:
            return default
        if not text.isdigit() or not low <= int(text) <= high:
            raise CosError(400, "InvalidArgument", f"{name} must be an integer from {low} to {high}, not {text!r}.")
        return int(text)

    def bucket(self) -> Bucket:
        return self.store.bucket(self.bucket_name, self.region)

    def resource(self, key: str = "") -> str:
        return access.resource(self.region, self.appid, self.bucket_name, key)

    def may(self, action: str, key: str) -> bool:
        return self.principal.may(f"name/cos:{action}", self.resource(key))

    def location(self, key: str) -> str:
        return f"{self.bucket_name}.cos.{self.region}.myqcloud.com/{quote(key)}"

    def owner(self) -> list[wire.Element]:
        return [("ID", f"qcs::cam::uin/{self.uin}:uin/{self.uin}"), ("DisplayName", self.uin)]

    def encode(self, text: str) -> str:
        """Keys in list answers are url-encoded when asked (``encoding-type=url``): the SDK always asks and
        always decodes, with ``unquote`` (so ``+`` must travel as %2B; client-recipes §3.4)."""
        return quote(text, safe="/") if self.param("encoding-type") == "url" else text

    def prefix_element(self, prefix: str) -> wire.Element:
        return ("CommonPrefixes", [("Prefix", self.encode(prefix))])

    def xml(self, root: str, children: Sequence[wire.Element]) -> web.Response:
        return wire.xml_response(self.request_id, root, children)

    def empty(self, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return wire.empty_response(self.request_id, status, headers)

    def content_md5(self) -> bytes | None:
        """The digest a ``Content-MD5`` header promises; COS checks every body against it."""
        header = self.request.headers.get("Content-MD5")
        if header is None:
            return None
        try:
            digest = base64.b64decode(header, validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != 16:
            raise CosError(400, "InvalidDigest", "The Content-MD5 you specified is not valid.")
        return digest

    async def read_xml(self) -> XmlElement:
        expected = self.content_md5()
        body = bytearray()
        async for chunk in self.request.content.iter_any():
            body += chunk
            if len(body) > MAX_XML_BODY:
                raise CosError(400, "EntityTooLarge", f"The XML body is larger than {MAX_XML_BODY} bytes.")
        if expected is not None and hashlib.md5(body).digest() != expected:
            raise bad_digest()
        return wire.parse_xml(bytes(body))


def bad_digest() -> CosError:
    return CosError(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")


Handler = Callable[[Call], Awaitable[web.StreamResponse]]
