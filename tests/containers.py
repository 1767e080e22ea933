"""The tests' container image, built once per run from Debian's packages and the project's CPU torch, and pushed to
an emulator's registry through the Registry API v2, as ``docker push`` does.

Two layers: the base (Debian's bash and python3, with the packages ``apt-get download`` takes for them, unpacked
by ``dpkg -x``; torch and what it imports, copied from the test virtualenv, which installed the CPU wheel), cached
for the run and shared by its workers; and the project's ``orchestrator`` package, for trainkit, as a user's
Dockerfile would ``pip install`` it. Layers go uncompressed (an OCI ``tar`` layer): gzip of a gigabyte would cost a
minute of CPU at every push.
"""

from __future__ import annotations

import base64
import compileall
import hashlib
import http.client
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cvmjob-tests" / "container"
DEBIAN_PACKAGES = ("bash", "coreutils", "python3", "libstdc++6", "libgomp1")  # the last two: what torch links to
# torch and what it imports at start (its metadata's requirements, less setuptools), pydantic for trainkit.
PYTHON_PACKAGES = ("torch", "torchgen", "functorch", "numpy", "filelock", "typing_extensions", "sympy", "mpmath",
                   "networkx", "jinja2", "markupsafe", "fsspec", "pydantic", "pydantic_core", "annotated_types",
                   "typing_inspection", "yaml")
SITE = "usr/local/lib/python3.11/dist-packages"  # where Debian's python3 finds what pip installs
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Layer:
    path: Path
    digest: str
    size: int


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            sha.update(block)
    return "sha256:" + sha.hexdigest()


def _layer(folder: Path, out: Path) -> Layer:
    subprocess.run(["tar", "--numeric-owner", "-C", str(folder), "-cf", str(out), "."], check=True)
    return Layer(out, _sha256(out), out.stat().st_size)


def _site_packages() -> Path:
    return Path(str(importlib.metadata.distribution("torch").locate_file("")))


def _copy_python_packages(root: Path, names: tuple[str, ...]) -> None:
    site, target = _site_packages(), root / SITE
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = site / name
        if source.is_dir():
            shutil.copytree(source, target / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "include", "test", "tests", "*.a"))
        elif (site / f"{name}.py").exists():
            shutil.copy2(site / f"{name}.py", target / f"{name}.py")
        else:
            raise RuntimeError(f"{name} is not installed in {site}: `make install` first")
        libs = site / f"{name}.libs"  # the shared libraries a manylinux wheel bundles
        if libs.is_dir():
            shutil.copytree(libs, target / libs.name, symlinks=True)


def _compile(root: Path) -> None:
    """Bytecode for every module, as pip and Debian's py3compile leave it: without it each ``import torch`` in a
    container compiled a thousand modules again (20 s of CPU for the preflight, as much for each DDP rank). The
    tests' interpreter is a 3.11, whose bytecode the image's 3.11 reads; the paths recorded are the image's. A
    file of newer syntax (torch ships one for 3.12) stays source, as pip leaves it."""
    for folder in (root / SITE, root / "usr/lib/python3.11"):
        compileall.compile_dir(folder, quiet=2, workers=0, stripdir=str(root), prependdir="/")


def base_layer(torch: bool = True) -> Layer:
    """Debian's bash and python3, with torch (``torch``) or without: built once, kept in the tests' cache (keyed by
    what it holds). Without torch it is a sixth of the size (165 MB against 931 MB): for tests whose training is
    torch-free (tiny.py, an exit code), which then pull and snapshot a sixth of the bytes."""
    python_packages = PYTHON_PACKAGES if torch else ()
    key = hashlib.sha256(json.dumps(["compiled", DEBIAN_PACKAGES, python_packages, importlib.metadata.version("torch"),
                                     importlib.metadata.version("pydantic")]).encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    out, meta = CACHE / f"base-{key}.tar", CACHE / f"base-{key}.json"
    with FileLock(str(CACHE / "build.lock")):
        if meta.exists():
            return Layer(out, json.loads(meta.read_text())["digest"], out.stat().st_size)
        with tempfile.TemporaryDirectory(dir=CACHE) as work:
            debs, root = Path(work) / "debs", Path(work) / "root"
            debs.mkdir()
            closure = subprocess.run(
                ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                 "--no-breaks", "--no-replaces", "--no-enhances", *DEBIAN_PACKAGES],
                check=True, capture_output=True, text=True).stdout
            packages = sorted({line for line in closure.splitlines() if line and not line.startswith((" ", "<"))})
            subprocess.run(["apt-get", "download", "-q", *packages], cwd=debs, check=True, capture_output=True)
            for deb in sorted(debs.glob("*.deb")):
                subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
            for folder in ("tmp", "proc", "sys", "dev", "etc", "root", "run"):
                (root / folder).mkdir(exist_ok=True)
            (root / "tmp").chmod(0o1777)
            _copy_python_packages(root, python_packages)
            _compile(root)
            layer = _layer(root, out)
        meta.write_text(json.dumps({"digest": layer.digest}))
        return layer


def code_layer(folder: Path) -> Layer:
    """The project's orchestrator package (trainkit and what it imports), as pip would install it."""
    root = folder / "code-root"
    shutil.copytree(REPO / "orchestrator", root / SITE / "orchestrator",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return _layer(root, folder / "code.tar")


class Pusher:
    """A registry client of the API v2 that pushes through the emulator's front door (the Host header names the
    registry), logging in at the token service as ``docker login`` does."""

    def __init__(self, endpoint: str, registry: str, username: str, password: str) -> None:
        self.host, _, port = endpoint.rpartition(":")
        self.port = int(port)
        self.registry = registry
        self.login = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.token = ""

    def _request(self, method: str, path: str, body: bytes | io.BufferedReader | None = None,
                 headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=600)
        sent = {"Host": self.registry, **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
                **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        response.read()
        connection.close()
        return response

    def authorize(self, repository: str) -> None:
        query = urlencode({"service": self.registry, "scope": f"repository:{repository}:pull,push"})
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        connection.request("GET", f"/service/token?{query}", headers={"Host": self.registry,
                                                                         "Authorization": self.login})
        response = connection.getresponse()
        body = response.read()
        connection.close()
        if response.status != 200:
            raise RuntimeError(f"the token service refused the login: {response.status} {body[:200]!r}")
        self.token = json.loads(body)["token"]

    def blob(self, repository: str, data: bytes | Path, digest: str, size: int) -> None:
        if self._request("HEAD", f"/v2/{repository}/blobs/{digest}").status == 200:
            return
        started = self._request("POST", f"/v2/{repository}/blobs/uploads/")
        assert started.status == 202, started.status
        location = started.headers["Location"]
        with (data.open("rb") if isinstance(data, Path) else io.BytesIO(data)) as body:
            done = self._request("PUT", f"{location}?digest={digest}", body,  # type: ignore[arg-type]
                                 {"Content-Length": str(size), "Content-Type": "application/octet-stream"})
        assert done.status == 201, done.status

    def push(self, repository: str, tag: str, layers: list[Layer]) -> str:
        """The image of ``layers`` (bottom first) as ``repository:tag``; its manifest's digest."""
        self.authorize(repository)
        for layer in layers:
            self.blob(repository, layer.path, layer.digest, layer.size)
        config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
                       "Cmd": ["bash"]},
            "rootfs": {"type": "layers", "diff_ids": [layer.digest for layer in layers]},
        }).encode()
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        self.blob(repository, config, config_digest, len(config))
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                       "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": layer.digest, "size": layer.size} for layer in layers],
        }).encode()
        done = self._request("PUT", f"/v2/{repository}/manifests/{tag}", manifest,
                             {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
        if done.status != 201:
            raise RuntimeError(f"the registry refused the manifest: {done.status}")
        return done.headers["Docker-Content-Digest"]


if __name__ == "__main__":  # build the base layer ahead of the tests (the Makefile's `image` target)
    print(base_layer().path, file=sys.stderr)
