"""The Docker Registry HTTP API v2 (distribution's spec) and the token service of each registry host the emulator
answers. What a client may do (pull, push) its token says (auth.py); what it uploads is checked against its digest
(store.py). Errors are the API's JSON (``{"errors": [{"code": ..., "message": ...}]}``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from aiohttp import web

from .auth import DOCKER_HUB, DOCKER_HUB_MIRROR, PERSONAL, TOKEN_PATH, TOKEN_SECONDS, Logins, challenge
from .enterprise import SUFFIX as ENTERPRISE_SUFFIX
from .store import REPOSITORY, Content, RegistryError

_API = re.compile(r"/v2/(?P<name>.+?)/(?P<kind>manifests|blobs|blobs/uploads)/(?P<ref>[^/]*)")
CHUNK = 1 << 20


def is_registry(host: str) -> bool:
    return host in (PERSONAL, DOCKER_HUB, DOCKER_HUB_MIRROR) or host.endswith(ENTERPRISE_SUFFIX)


def _holder(host: str) -> str:
    """The registry whose repositories ``host`` serves: Docker Hub's for its mirror."""
    return DOCKER_HUB if host == DOCKER_HUB_MIRROR else host


@dataclass
class Registry:
    content: Content
    logins: Logins

    async def handle(self, request: web.Request, host: str, now: float) -> web.StreamResponse:
        path = urlsplit(request.raw_path).path
        if host.endswith(ENTERPRISE_SUFFIX) and self.logins.enterprise.at(host) is None:
            return web.Response(status=502, reason="Unknown Host",
                                text=f"{host} does not resolve: no enterprise instance of this account has that name\n")
        try:
            if path == TOKEN_PATH:
                return self._token(request, host, now)
            if path.rstrip("/") == "/v2":
                self.logins.allowed(host, request.headers.get("Authorization", ""), None, "pull", now)
                return web.Response(status=200, headers={"Docker-Distribution-API-Version": "registry/2.0"})
            match = _API.fullmatch(path)
            if match is None:
                raise RegistryError("UNSUPPORTED", 404, f"{request.method} {path} is not a route of the API v2")
            name, kind, ref = match["name"], match["kind"], match["ref"]
            if not REPOSITORY.fullmatch(name):
                raise RegistryError("NAME_INVALID", 400, f"{name!r} is not a repository name")
            action = "pull" if request.method in ("GET", "HEAD") else "push"
            try:
                self.logins.allowed(host, request.headers.get("Authorization", ""), name, action, now)
            except RegistryError as exc:
                return _error(exc, challenge(host, name, action))
            if kind == "manifests":
                return await self._manifest(request, host, name, ref)
            if kind == "blobs":
                return await self._blob(request, ref)
            return await self._upload(request, name, ref)
        except RegistryError as exc:
            return _error(exc, challenge(host, None, "pull") if exc.status == 401 else None)

    def _token(self, request: web.Request, host: str, now: float) -> web.Response:
        query = parse_qs(urlsplit(request.raw_path).query)
        user = self.logins.login(host, request.headers.get("Authorization", ""), now)
        token = self.logins.issue(host, user, query.get("scope", []), now)
        return _json({"token": token, "access_token": token, "expires_in": TOKEN_SECONDS})

    async def _manifest(self, request: web.Request, host: str, name: str, ref: str) -> web.StreamResponse:
        if request.method == "PUT":
            body = await request.read()
            media_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            digest = self.content.put_manifest(_holder(host), name, ref, media_type, body)
            return web.Response(status=201, headers={"Location": f"/v2/{name}/manifests/{digest}",
                                                     "Docker-Content-Digest": digest})
        if request.method not in ("GET", "HEAD"):
            raise RegistryError("UNSUPPORTED", 405, f"{request.method} of a manifest is not supported")
        manifest = self.content.manifest(_holder(host), name, ref)
        headers = {"Content-Type": manifest.media_type, "Docker-Content-Digest": manifest.digest,
                   "Content-Length": str(len(manifest.body))}
        return web.Response(body=None if request.method == "HEAD" else manifest.body, headers=headers)

    async def _blob(self, request: web.Request, digest: str) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise RegistryError("UNSUPPORTED", 405, f"{request.method} of a blob is not supported")
        path = self.content.blob(digest)
        if path is None:
            raise RegistryError("BLOB_UNKNOWN", 404, f"blob {digest} is unknown to this registry")
        headers = {"Docker-Content-Digest": digest, "Content-Type": "application/octet-stream"}
        if request.method == "HEAD":
            return web.Response(headers={**headers, "Content-Length": str(path.stat().st_size)})
        return web.FileResponse(path, headers=headers)

    async def _upload(self, request: web.Request, name: str, upload: str) -> web.StreamResponse:
        query = parse_qs(urlsplit(request.raw_path).query)
        if request.method == "POST" and not upload:
            upload = self.content.start_upload()
            if "digest" in query:  # a monolithic upload
                await self._receive(request, upload)
                return self._committed(name, upload, query["digest"][0])
            return _accepted(name, upload, 0)
        if request.method == "PATCH":
            return _accepted(name, upload, await self._receive(request, upload))
        if request.method == "PUT":
            await self._receive(request, upload)
            if "digest" not in query:
                raise RegistryError("DIGEST_INVALID", 400, "the upload's last PUT names no digest")
            return self._committed(name, upload, query["digest"][0])
        if request.method == "GET":
            return web.Response(status=204, headers=_upload_headers(name, upload, self.content.received(upload)))
        raise RegistryError("UNSUPPORTED", 405, f"{request.method} of an upload is not supported")

    async def _receive(self, request: web.Request, upload: str) -> int:
        received = self.content.received(upload)
        while chunk := await request.content.read(CHUNK):
            received = self.content.append(upload, chunk)
        return received

    def _committed(self, name: str, upload: str, digest: str) -> web.Response:
        self.content.commit(upload, digest)
        return web.Response(status=201, headers={"Location": f"/v2/{name}/blobs/{digest}",
                                                 "Docker-Content-Digest": digest})


def _upload_headers(name: str, upload: str, received: int) -> dict[str, str]:
    return {"Location": f"/v2/{name}/blobs/uploads/{upload}", "Docker-Upload-UUID": upload,
            "Range": f"0-{max(received - 1, 0)}"}


def _accepted(name: str, upload: str, received: int) -> web.Response:
    return web.Response(status=202, headers=_upload_headers(name, upload, received))


def _json(data: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(data).encode(), status=status,
                        headers={"Content-Type": "application/json", **(headers or {})})


def _error(exc: RegistryError, www_authenticate: str | None) -> web.Response:
    headers = {"WWW-Authenticate": www_authenticate} if www_authenticate and exc.status == 401 else {}
    return _json({"errors": [{"code": exc.code, "message": str(exc)}]}, exc.status, headers)
