"""A registry's content on disk: blobs by digest (shared by every repository, as a registry deduplicates them),
and each repository's manifests by tag and by digest. Digests are checked as content arrives: a blob or
manifest whose bytes do not hash to the digest given is refused, never stored."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

# distribution/reference's grammar: path components of lower-case alphanumerics joined by separators.
REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MAX_MANIFEST = 4 * 1024 * 1024  # distribution's own limit


class RegistryError(Exception):
    """An error of the API v2's list (code, HTTP status), with its message."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Manifest:
    media_type: str
    body: bytes

    @property
    def digest(self) -> str:
        return digest_of(self.body)


class Content:
    """Blobs under ``root/blobs``, uploads in progress under ``root/uploads``, manifests under
    ``root/repositories/<registry>/<repository>``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._make()

    def _make(self) -> None:
        for folder in ("blobs", "uploads", "repositories"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)

    def blob(self, digest: str) -> Path | None:
        if not DIGEST.fullmatch(digest):
            raise RegistryError("DIGEST_INVALID", 400, f"{digest!r} is not a sha256 digest")
        path = self.root / "blobs" / digest.removeprefix("sha256:")
        return path if path.exists() else None

    # -- uploads ---------------------------------------------------------------------------------------
    def start_upload(self) -> str:
        upload = uuid.uuid4().hex
        (self.root / "uploads" / upload).touch()
        return upload

    def _upload(self, upload: str) -> Path:
        path = self.root / "uploads" / upload
        if not re.fullmatch(r"[a-f0-9]{32}", upload) or not path.exists():
            raise RegistryError("BLOB_UPLOAD_UNKNOWN", 404, f"no upload {upload} in progress")
        return path

    def append(self, upload: str, chunk: bytes) -> int:
        """Add ``chunk``; the bytes received so far."""
        path = self._upload(upload)
        with path.open("ab") as f:
            f.write(chunk)
        return path.stat().st_size

    def received(self, upload: str) -> int:
        return self._upload(upload).stat().st_size

    def commit(self, upload: str, digest: str) -> None:
        path = self._upload(upload)
        if not DIGEST.fullmatch(digest):
            raise RegistryError("DIGEST_INVALID", 400, f"{digest!r} is not a sha256 digest")
        sha = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        if "sha256:" + sha.hexdigest() != digest:
            path.unlink()
            raise RegistryError("DIGEST_INVALID", 400, f"the upload's content does not match {digest}")
        os.replace(path, self.root / "blobs" / digest.removeprefix("sha256:"))

    # -- manifests -------------------------------------------------------------------------------------
    def _repository(self, registry: str, repository: str) -> Path:
        return self.root / "repositories" / registry / repository

    def put_manifest(self, registry: str, repository: str, reference: str, media_type: str, body: bytes) -> str:
        """Store a manifest whose every blob is here; its digest."""
        if media_type not in MANIFEST_TYPES:
            raise RegistryError("MANIFEST_INVALID", 400, f"manifest media type {media_type!r} is not one of "
                                                         f"{', '.join(MANIFEST_TYPES)}")
        if len(body) > MAX_MANIFEST:
            raise RegistryError("SIZE_INVALID", 400, f"a manifest may have at most {MAX_MANIFEST} bytes")
        try:
            doc = json.loads(body)
        except ValueError:
            raise RegistryError("MANIFEST_INVALID", 400, "the manifest is not JSON") from None
        digest = digest_of(body)
        if DIGEST.fullmatch(reference) and reference != digest:
            raise RegistryError("DIGEST_INVALID", 400, f"the manifest's content does not match {reference}")
        if not DIGEST.fullmatch(reference) and not TAG.fullmatch(reference):
            raise RegistryError("TAG_INVALID", 400, f"{reference!r} is not a tag")
        for blob in _referenced(doc, media_type):
            if self.blob(blob) is None:
                raise RegistryError("MANIFEST_BLOB_UNKNOWN", 400, f"the manifest names blob {blob}, not uploaded")
        folder = self._repository(registry, repository)
        (folder / "digests").mkdir(parents=True, exist_ok=True)
        (folder / "tags").mkdir(parents=True, exist_ok=True)
        _write(folder / "digests" / digest.removeprefix("sha256:"), json.dumps({"media_type": media_type}).encode()
               + b"\n" + body)
        if not DIGEST.fullmatch(reference):
            _write(folder / "tags" / reference, digest.encode())
        return digest

    def manifest(self, registry: str, repository: str, reference: str) -> Manifest:
        folder = self._repository(registry, repository)
        if not folder.exists():
            raise RegistryError("NAME_UNKNOWN", 404, f"repository {registry}/{repository} does not exist")
        digest = reference
        if not DIGEST.fullmatch(reference):
            tag = folder / "tags" / reference
            if not TAG.fullmatch(reference) or not tag.exists():
                raise RegistryError("MANIFEST_UNKNOWN", 404,
                                    f"{registry}/{repository} has no tag {reference!r}")
            digest = tag.read_text()
        path = folder / "digests" / digest.removeprefix("sha256:")
        if not path.exists():
            raise RegistryError("MANIFEST_UNKNOWN", 404, f"{registry}/{repository} has no manifest {digest}")
        head, body = path.read_bytes().split(b"\n", 1)
        return Manifest(json.loads(head)["media_type"], body)

    def discard(self) -> None:
        """A reset: every image goes."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._make()


def _referenced(doc: dict[str, object], media_type: str) -> list[str]:
    """The blobs an image manifest names (config and layers); an index names manifests, not blobs."""
    if "index" in media_type or "list" in media_type:
        return []
    found = []
    for entry in [doc.get("config"), *(doc.get("layers") or [])]:  # type: ignore[misc]
        if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
            raise RegistryError("MANIFEST_INVALID", 400, "the manifest's config and layers need a digest each")
        found.append(entry["digest"])
    return found


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
