"""COS emulator throughput next to nginx serving the same bytes from the same disk.

    python benchmarks/cos_throughput.py [--size-mib 1024] [--small 10000] [--threads 8] [--repeat 3] [--no-nginx]

Prints, side by side: GET and PUT MB/s for one large object moved as parallel 64 MiB pieces (ranged GETs; PUT
as multipart UploadPart to the emulator and as separate files to nginx's WebDAV PUT), and objects/s for many
small objects (PUT, then GET). Requests to the emulator are correctly q-signed (signatures computed before the
clock starts); nginx needs none. Both run on 127.0.0.1 with their data under one temporary directory.
``--no-nginx`` measures the emulator alone (where nginx is not installed; its column shows ``-``).
"""

from __future__ import annotations

import argparse
import http.client
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urlencode

from qcloud_cos import CosConfig, CosS3Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from tests.emulator_process import EmulatorProcess, start_emulator

MiB = 1024 * 1024
PIECE = 64 * MiB
SMALL_SIZE = 4096
REGION = "ap-guangzhou"

NGINX_CONF = """
user {user};
worker_processes auto;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    map $arg_limit_rate $paced {{ "" 0; default $arg_limit_rate; }}  # ?limit_rate=N: N bytes/s a connection
    server {{
        listen 127.0.0.1:{port};
        root {root};
        client_max_body_size 0;
        location / {{
            dav_methods PUT;
            create_full_put_path on;
            limit_rate $paced;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # origin-form target
    headers: dict[str, str]
    body: bytes | memoryview = b""
    range: tuple[int, int] | None = None  # inclusive byte range to GET


class Target(Protocol):
    """One server as the benchmark sees it: how to address (and, for COS, sign) a request."""

    name: str
    port: int

    def request(self, method: str, key: str) -> Request: ...

    def prepare_large_put(self, key: str, pieces: int) -> Callable[[int], Request]:
        """Per-piece PUT requests for a large object; may start a multipart upload."""
        ...

    def finish_large_put(self, key: str, etags: list[str]) -> None: ...


class Nginx:
    name = "nginx"

    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method: str, key: str) -> Request:
        return Request(method, "/" + quote(key), {})

    def prepare_large_put(self, key: str, pieces: int) -> Callable[[int], Request]:
        return lambda index: self.request("PUT", f"{key}.parts/{index}")

    def finish_large_put(self, key: str, etags: list[str]) -> None:
        """Nothing to assemble: the pieces stay separate files."""


class Emulator:
    name = "emulator"

    def __init__(self, emulator: EmulatorProcess, bucket: str) -> None:
        self.port = emulator.port
        self.bucket = bucket
        self.host = f"{bucket}.cos.{REGION}.myqcloud.com"
        conf = CosConfig(
            Region=REGION, SecretId=emulator.secret_id, SecretKey=emulator.secret_key, Scheme="http",
            IP="127.0.0.1", Port=emulator.port,
        )  # fmt: skip
        self.cos = CosS3Client(conf, retry=0)
        self.upload_id = ""

    def request(self, method: str, key: str, params: dict[str, str] | None = None) -> Request:
        """Signed ahead of time (valid an hour), so signing stays out of the timed path."""
        params = params or {}
        auth = self.cos.get_auth(
            Method=method, Bucket=self.bucket, Key=key, Expired=3600, Headers={"Host": self.host}, Params=params
        )
        path = "/" + quote(key) + ("?" + urlencode(params) if params else "")
        return Request(method, path, {"Host": self.host, "Authorization": auth})

    def prepare_large_put(self, key: str, pieces: int) -> Callable[[int], Request]:
        self.upload_id = self.cos.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        signed = [
            self.request("PUT", key, {"partNumber": str(i + 1), "uploadId": self.upload_id}) for i in range(pieces)
        ]
        return signed.__getitem__

    def finish_large_put(self, key: str, etags: list[str]) -> None:
        parts = [{"PartNumber": i + 1, "ETag": etag} for i, etag in enumerate(etags)]
        self.cos.complete_multipart_upload(
            Bucket=self.bucket, Key=key, UploadId=self.upload_id, MultipartUpload={"Part": parts}
        )


class Connections:
    """One keep-alive HTTP connection per thread, as a client pool would hold."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()
        self.opened: list[http.client.HTTPConnection] = []  # closed by close(): the threads' locals outlive them

    def close(self) -> None:
        for conn in self.opened:
            conn.close()

    def send(self, request: Request) -> tuple[int, str, int]:
        """Send, read the whole answer (discarding the body), return (status, ETag, body bytes)."""
        conn: http.client.HTTPConnection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.opened.append(conn)
        headers = dict(request.headers)
        if request.range is not None:
            headers["Range"] = "bytes={}-{}".format(*request.range)
        conn.request(request.method, request.path, body=request.body, headers=headers)
        response = conn.getresponse()
        received = 0
        buffer = bytearray(MiB)
        view = memoryview(buffer)
        while count := response.readinto(view):
            received += count
        if response.status >= 300:
            raise RuntimeError(f"{request.method} {request.path}: HTTP {response.status}")
        return response.status, response.getheader("ETag") or "", received


def timed(jobs: list[Request], connections: Connections, threads: int) -> tuple[float, list[tuple[int, str, int]]]:
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(connections.send, jobs))
    return time.perf_counter() - started, results


def timed_once(jobs: list[Request], port: int, threads: int) -> tuple[float, list[tuple[int, str, int]]]:
    """``timed`` on connections of its own, closed afterwards."""
    connections = Connections(port)
    try:
        return timed(jobs, connections, threads)
    finally:
        connections.close()


def large_put(target: Target, key: str, block: bytes, pieces: int, threads: int) -> float:
    started = time.perf_counter()
    piece_request = target.prepare_large_put(key, pieces)
    jobs = [Request(r.method, r.path, r.headers, block) for r in map(piece_request, range(pieces))]
    _, results = timed_once(jobs, target.port, threads)
    target.finish_large_put(key, [etag for _, etag, _ in results])
    return time.perf_counter() - started


def large_get(target: Target, key: str, size: int, threads: int) -> float:
    base = target.request("GET", key)
    jobs = [
        Request("GET", base.path, base.headers, range=(start, min(start + PIECE, size) - 1))
        for start in range(0, size, PIECE)
    ]
    elapsed, results = timed_once(jobs, target.port, threads)
    assert sum(received for _, _, received in results) == size
    return elapsed


def small_objects(target: Target, count: int, threads: int) -> tuple[float, float]:
    body = os.urandom(SMALL_SIZE)
    keys = [f"small/{i:06d}" for i in range(count)]
    puts = [Request(r.method, r.path, r.headers, body) for r in (target.request("PUT", k) for k in keys)]
    gets = [target.request("GET", k) for k in keys]
    connections = Connections(target.port)
    try:
        put_seconds, _ = timed(puts, connections, threads)
        get_seconds, results = timed(gets, connections, threads)
    finally:
        connections.close()
    assert all(received == SMALL_SIZE for _, _, received in results)
    return put_seconds, get_seconds


# -- servers -------------------------------------------------------------------------------------------------
def find_nginx() -> str:
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if nginx is None:
        sys.exit("nginx is not installed; on Debian/Ubuntu: sudo apt-get install -y nginx")
    version = subprocess.run([nginx, "-V"], capture_output=True, text=True, check=True).stderr
    if "--with-http_dav_module" not in version:
        sys.exit(f"{nginx} lacks the WebDAV module (--with-http_dav_module) that PUT needs")
    return nginx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"nginx exited with {process.returncode}: {log.read_text() if log.exists() else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("nginx did not start listening in 20 s")


def start_nginx(nginx: str, prefix: Path) -> tuple[subprocess.Popen[bytes], int]:
    root = prefix / "root"
    root.mkdir(parents=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    user = pwd.getpwuid(os.geteuid()).pw_name  # workers write the files; ignored unless started as root
    conf.write_text(NGINX_CONF.format(user=user, prefix=prefix, port=port, root=root))
    process = subprocess.Popen(
        [nginx, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_port(port, process, prefix / "error.log")
    return process, port


# -- report --------------------------------------------------------------------------------------------------
@dataclass
class Row:
    label: str
    unit: str
    values: dict[str, float]

    def line(self) -> str:
        emulator, nginx = self.values["emulator"], self.values.get("nginx")
        if nginx is None:  # --no-nginx
            return f"{self.label:<38} {emulator:>10.0f} {'-':>10}  {self.unit:<6} {'-':>8}"
        return f"{self.label:<38} {emulator:>10.0f} {nginx:>10.0f}  {self.unit:<6} {emulator / nginx:>8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="the large object (a multiple of 64)")
    parser.add_argument("--small", type=int, default=10_000, help="how many 4 KiB objects")
    parser.add_argument("--threads", type=int, default=8, help="client threads for large pieces")
    parser.add_argument("--small-threads", type=int, default=16, help="client threads for small objects")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every workload; the median is shown")
    parser.add_argument("--no-nginx", action="store_true", help="the emulator alone (no nginx installed)")
    args = parser.parse_args()
    nginx_binary = None if args.no_nginx else find_nginx()
    size = args.size_mib * MiB
    pieces = size // PIECE
    block = os.urandom(PIECE)  # every piece sends these bytes: the client holds 64 MiB, not the whole object

    with tempfile.TemporaryDirectory(prefix="cos-bench-") as scratch:
        work = Path(scratch)
        emulator = start_emulator(work / "emulator" / "state")
        nginx_process = None
        try:
            bucket = f"bench-{emulator.appid}"
            cos_target = Emulator(emulator, bucket)
            cos_target.cos.create_bucket(Bucket=bucket)
            targets: list[Target] = [cos_target]
            if nginx_binary is not None:
                nginx_process, nginx_port = start_nginx(nginx_binary, work / "nginx")
                with (work / "nginx" / "root" / "large.bin").open("wb") as f:  # nginx's GET source, written untimed
                    for _ in range(pieces):
                        f.write(block)
                targets.append(Nginx(nginx_port))
            rows = [
                Row(f"PUT {args.size_mib} MiB, {pieces} x 64 MiB parallel", "MB/s", {}),
                Row(f"GET {args.size_mib} MiB, {pieces} x 64 MiB ranges", "MB/s", {}),
                Row(f"PUT {args.small} x 4 KiB objects", "obj/s", {}),
                Row(f"GET {args.small} x 4 KiB objects", "obj/s", {}),
            ]
            # Rounds alternate between the servers, so a load that comes and goes on the machine hits both alike.
            seconds: dict[tuple[int, str], list[float]] = {}
            for _ in range(args.repeat):
                for target in targets:
                    put_seconds = large_put(target, "large.bin", block, pieces, args.threads)
                    get_seconds = large_get(target, "large.bin", size, args.threads)
                    small_put_seconds, small_get_seconds = small_objects(target, args.small, args.small_threads)
                    for index, elapsed in enumerate((put_seconds, get_seconds, small_put_seconds, small_get_seconds)):
                        seconds.setdefault((index, target.name), []).append(elapsed)
            amounts = (size / 1e6, size / 1e6, args.small, args.small)
            for (index, name), times in seconds.items():
                rows[index].values[name] = amounts[index] / statistics.median(times)
        finally:
            if nginx_process is not None:
                nginx_process.terminate()
                nginx_process.wait()
            emulator.stop()

    against = "" if nginx_binary is None else " vs nginx"
    print(f"COS emulator{against} on 127.0.0.1 ({os.cpu_count()} CPUs; client threads: {args.threads} large, "
          f"{args.small_threads} small; median of {args.repeat} rounds)")  # fmt: skip
    print(f"{'workload':<38} {'emulator':>10} {'nginx':>10}  {'unit':<6} {'emu/nginx':>8}")
    for row in rows:
        print(row.line())


if __name__ == "__main__":
    main()
