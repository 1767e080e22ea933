"""cvmjob's data sync and checkpoint upload next to the official SDK, coscmd, and nginx as the ceiling.

    python benchmarks/sync_throughput.py [--small 3000] [--small-kib 110] [--large-mib 1024] [--repeat 3]
                                         [--skip-coscmd] [--no-nginx] [--link-gbps 10] [--connection-mbps 50]

One emulator holds a prefix of ``--small`` objects of ``--small-kib`` KiB and one object of ``--large-mib`` MiB;
nginx serves the same files from the same disk. Each contestant runs in a process of its own (its peak RSS is
that process's), downloads into an empty folder, and the folder is checked (file count, bytes) afterwards:

- **cvmjob**: the agent's own ``sync_data`` (listing, plan, CRC-64-verified atomic downloads, the index), and for
  uploads the agent's ``CheckpointUploader`` over a checkpoint folder (verified parts, then the manifest), with
  the ranges in flight that the agent keeps on an instance of ``--link-gbps``.
- **SDK**: cos-python-sdk-v5 as its README shows it: a sequential ``get_object`` / ``put_object`` loop over the
  listing for small objects, ``download_file`` / ``upload_file`` at their defaults for the large one.
- **coscmd**: ``coscmd download -r`` / ``upload -r`` (its own defaults), through the emulator's proxy as
  client-recipes §4.2 sets it up; its time includes its start (about half a second).
- **nginx**: plain keep-alive ``http.client`` connections, 16 threads for small files and 8 ranged GETs/PUTs of
  64 MiB for the large one, writing/reading the same local disk, with no signature and no checksum: what the
  loopback and the disk allow. ``--no-nginx`` leaves it out (where nginx is not installed).

The large object is moved once more with every connection held to ``--connection-mbps`` (the emulator's
``slow_body`` fault on every request, nginx's ``limit_rate``): what a network path that limits each connection
does, which the loopback does not. The default, 50 MB/s, is what the AWS Common Runtime's S3 client plans for a
connection (4 Gbps per 10). nginx's client then keeps as many connections as cvmjob; it cannot pace an upload.

Times exclude each process's imports and start with the disks synced; every contestant's bytes land in the page
cache the same way (only cvmjob syncs them: its data index, every 5 s and once more after the sync returns, off the
clock for the last one as a training would not wait for it either). The emulator runs on the same
CPUs as the clients, so small-object rates here are a floor for what a real COS endpoint allows.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from benchmarks.cos_throughput import find_nginx, start_nginx
from orchestrator.agent.cloud import ranges_in_flight
from tests.emulator.test_coscmd import Coscmd, clients_venv
from tests.emulator_process import EmulatorProcess, start_emulator

MiB = 1024 * 1024
REGION = "ap-guangzhou"
PIECE = 64 * MiB
SMALL_PREFIX = "small/"
LARGE_KEY = "large/data.bin"


# -- contestants: each runs in a worker process (``--worker NAME``) and prints {"seconds", "rss_mb"} ---------
def _sdk_client(cfg: dict[str, Any]) -> Any:
    from qcloud_cos import CosConfig, CosS3Client

    conf = CosConfig(Region=REGION, SecretId=cfg["secret_id"], SecretKey=cfg["secret_key"], Scheme="http",
                     IP="127.0.0.1", Port=cfg["port"])
    return CosS3Client(conf)


def _listed_keys(client: Any, bucket: str, prefix: str) -> list[str]:
    keys, marker = [], ""
    while True:
        page = client.list_objects(Bucket=bucket, Prefix=prefix, Marker=marker, MaxKeys=1000)
        keys += [item["Key"] for item in page.get("Contents", [])]
        if page.get("IsTruncated") != "true":
            return keys
        marker = page["NextMarker"]


def _cvmjob_stores(cfg: dict[str, Any]) -> Any:
    from orchestrator.agent.cloud import Stores
    from orchestrator.providers.tencent import StaticCredential, TencentSdk

    sdk = TencentSdk(StaticCredential(cfg["secret_id"], cfg["secret_key"]), REGION, endpoint=cfg["endpoint"],
                     appid=cfg["appid"])
    return Stores(sdk, cfg["ranges"])


def cvmjob_download(cfg: dict[str, Any]) -> Callable[[], None]:
    from orchestrator.agent.status import StatusBoard
    from orchestrator.agent.stop import StopSignal
    from orchestrator.agent.sync import DataEntry, sync_data

    stores = _cvmjob_stores(cfg)
    entry = DataEntry(cfg["bucket"], cfg["prefix"], "data")

    def run() -> None:
        sync_data([entry], Path(cfg["dest"]), stores, StatusBoard(0, 0, "ins-bench"), StopSignal())

    return run


def cvmjob_upload(cfg: dict[str, Any]) -> Callable[[], None]:
    from orchestrator.agent.status import StatusBoard
    from orchestrator.agent.uploader import CheckpointUploader

    stores = _cvmjob_stores(cfg)
    uploader = CheckpointUploader(Path(cfg["source"]), stores.bucket(cfg["bucket"]), cfg["prefix"], keep_last=3,
                                  attempt=0, board=StatusBoard(0, 0, "ins-bench"), keep_local=10,
                                  job_id="bench")

    def run() -> None:
        uploader.read_manifest()
        uploader.tick()
        if uploader.uploaded != 1:
            raise SystemExit("the checkpoint was not uploaded")

    return run


def sdk_download(cfg: dict[str, Any]) -> Callable[[], None]:
    client, dest = _sdk_client(cfg), Path(cfg["dest"])

    def run() -> None:
        for key in _listed_keys(client, cfg["bucket"], cfg["prefix"]):
            path = dest / key
            path.parent.mkdir(parents=True, exist_ok=True)
            if cfg["large"]:
                client.download_file(Bucket=cfg["bucket"], Key=key, DestFilePath=str(path))
            else:
                client.get_object(Bucket=cfg["bucket"], Key=key)["Body"].get_stream_to_file(str(path))

    return run


def sdk_upload(cfg: dict[str, Any]) -> Callable[[], None]:
    client, source = _sdk_client(cfg), Path(cfg["source"])

    def run() -> None:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            key = cfg["prefix"] + path.relative_to(source).as_posix()
            if cfg["large"]:
                client.upload_file(Bucket=cfg["bucket"], Key=key, LocalFilePath=str(path))
            else:
                with path.open("rb") as f:
                    client.put_object(Bucket=cfg["bucket"], Key=key, Body=f)

    return run


def _coscmd(cfg: dict[str, Any]) -> Coscmd:
    emulator: Any = types.SimpleNamespace(**cfg["emulator"])  # the endpoint and keys, all that Coscmd reads
    return Coscmd(clients_venv() / "bin" / "coscmd", Path(cfg["home"]), emulator, cfg["bucket"])


def coscmd_download(cfg: dict[str, Any]) -> Callable[[], None]:
    coscmd = _coscmd(cfg)
    return lambda: _checked(coscmd("download", "-r", "-f", cfg["prefix"], cfg["dest"] + "/"))


def coscmd_upload(cfg: dict[str, Any]) -> Callable[[], None]:
    coscmd = _coscmd(cfg)
    return lambda: _checked(coscmd("upload", "-r", cfg["source"] + "/", cfg["prefix"]))


def _checked(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise SystemExit(f"coscmd failed ({done.returncode}): {done.stderr[-2000:]}")


def _nginx_send(port: int, local: Any, method: str, path: str, body: bytes = b"",
                span: tuple[int, int] | None = None) -> bytes:
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Range": f"bytes={span[0]}-{span[1]}"} if span else {}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise SystemExit(f"nginx: {method} {path}: HTTP {response.status}")
    return data


def nginx_download(cfg: dict[str, Any]) -> Callable[[], None]:
    import threading

    local, port, dest = threading.local(), cfg["port"], Path(cfg["dest"])
    files: list[tuple[str, int]] = cfg["files"]

    def small(item: tuple[str, int]) -> None:
        path = dest / item[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_nginx_send(port, local, "GET", "/" + quote(item[0])))

    def run() -> None:
        if not cfg["large"]:
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(small, files))
            return
        name, size = files[0]
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        target = "/" + quote(name) + (f"?limit_rate={cfg['limit_rate']}" if cfg["limit_rate"] else "")

        def piece(start: int) -> None:
            os.pwrite(fd, _nginx_send(port, local, "GET", target, span=(start, min(start + cfg["piece"], size) - 1)),
                      start)

        try:
            with ThreadPoolExecutor(cfg["threads"]) as pool:
                list(pool.map(piece, range(0, size, cfg["piece"])))
        finally:
            os.close(fd)

    return run


def nginx_upload(cfg: dict[str, Any]) -> Callable[[], None]:
    import threading

    local, port, source = threading.local(), cfg["port"], Path(cfg["source"])

    def small(path: Path) -> None:
        _nginx_send(port, local, "PUT", "/up/" + quote(path.relative_to(source).as_posix()), path.read_bytes())

    def run() -> None:
        paths = sorted(p for p in source.rglob("*") if p.is_file())
        if not cfg["large"]:
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(small, paths))
            return
        (path,) = paths

        def piece(start: int) -> None:
            with path.open("rb") as f:
                f.seek(start)
                _nginx_send(port, local, "PUT", f"/up/large.parts/{start}", f.read(PIECE))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(piece, range(0, path.stat().st_size, PIECE)))

    return run


WORKERS: dict[str, Callable[[dict[str, Any]], Callable[[], None]]] = {
    "cvmjob-download": cvmjob_download, "cvmjob-upload": cvmjob_upload,
    "sdk-download": sdk_download, "sdk-upload": sdk_upload,
    "coscmd-download": coscmd_download, "coscmd-upload": coscmd_upload,
    "nginx-download": nginx_download, "nginx-upload": nginx_upload,
}


def worker(name: str, cfg: dict[str, Any]) -> None:
    run = WORKERS[name](cfg)  # imports and clients are made here, outside the clock
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak RSS since its exec (VmHWM). Not getrusage's ru_maxrss: Linux carries the forking
    parent's peak over an exec into it, and this parent held the large object's seeding buffers."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmHWM in /proc/self/status (Linux only)")


# -- the run -------------------------------------------------------------------------------------------------
def measure(name: str, cfg: dict[str, Any]) -> dict[str, float]:
    # Every contestant starts with no dirty pages: the 1 GiB that the one before wrote would otherwise be written
    # back while this one runs, whoever it is (cvmjob's large download read 484 MB/s in one run and 1,406 in
    # another on this quiet machine, the SDK's 1,184 and 1,417).
    os.sync()
    done = subprocess.run([sys.executable, __file__, "--worker", name, json.dumps(cfg)], capture_output=True,
                          text=True, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def folder_totals(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and ".cvmjob-index" not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def seed(emulator: EmulatorProcess, bucket: str, nginx_root: Path, data: Path, args: argparse.Namespace) -> None:
    """The objects in COS (through the SDK, untimed) and the same bytes as files for nginx and for uploads."""
    from qcloud_cos import CosConfig, CosS3Client

    cos = CosS3Client(CosConfig(Region=REGION, SecretId=emulator.secret_id, SecretKey=emulator.secret_key,
                                Scheme="http", IP="127.0.0.1", Port=emulator.port))
    cos.create_bucket(Bucket=bucket)
    small_dir, large_dir = data / "small" / "step-1", data / "large" / "step-1"
    small_dir.mkdir(parents=True)
    large_dir.mkdir(parents=True)
    for i in range(args.small):
        (small_dir / f"{i:07d}.jpg").write_bytes(os.urandom(args.small_kib * 1024))
    with (large_dir / "data.bin").open("wb") as f:
        for _ in range(args.large_mib):
            f.write(os.urandom(MiB))

    def put(path: Path) -> None:
        key = SMALL_PREFIX + path.name
        cos.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, sorted(small_dir.iterdir())))
    cos.upload_file(Bucket=bucket, Key=LARGE_KEY, LocalFilePath=str(large_dir / "data.bin"), PartSize=64, MAXThread=8)
    (nginx_root / "small").mkdir(parents=True)
    (nginx_root / "large").mkdir(parents=True)
    for path in small_dir.iterdir():
        os.link(path, nginx_root / "small" / path.name)
    os.link(large_dir / "data.bin", nginx_root / LARGE_KEY)
    (nginx_root / "up").mkdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=3000, help="how many small objects")
    parser.add_argument("--small-kib", type=int, default=110, help="the size of each small object")
    parser.add_argument("--large-mib", type=int, default=1024, help="the size of the large object")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each workload; the median is shown")
    parser.add_argument("--skip-coscmd", action="store_true", help="leave coscmd out (no clients virtualenv)")
    parser.add_argument("--no-nginx", action="store_true", help="leave nginx, the ceiling, out (not installed)")
    parser.add_argument("--link-gbps", type=float, default=10.0,
                        help="the instance bandwidth cvmjob's agent sizes its large transfers to (the emulator's)")
    parser.add_argument("--connection-mbps", type=float, default=50.0,
                        help="the large object once more with every connection held to this many MB/s (0: skip)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("config", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.config))
        return
    use_coscmd = not args.skip_coscmd
    if use_coscmd and not (clients_venv() / "bin" / "coscmd").exists():
        sys.exit(f"coscmd is not installed at {clients_venv()}: `make clients`, or pass --skip-coscmd")
    nginx_binary = None if args.no_nginx else find_nginx()
    contestants = ["cvmjob", "sdk", *(["coscmd"] if use_coscmd else []), *(["nginx"] if nginx_binary else [])]
    ranges = ranges_in_flight(args.link_gbps)
    rows: list[tuple[str, str, dict[str, dict[str, float]]]] = []
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as scratch:
        work = Path(scratch)
        emulator = start_emulator(work / "emulator" / "state")
        nginx_process, nginx_port = None, 0
        if nginx_binary is not None:
            nginx_process, nginx_port = start_nginx(nginx_binary, work / "nginx")
        else:  # its root still holds the files' links: the workloads list what they move from there
            (work / "nginx" / "root").mkdir(parents=True)
        try:
            bucket = f"bench-{emulator.appid}"
            seed(emulator, bucket, work / "nginx" / "root", work / "data", args)
            common = {"secret_id": emulator.secret_id, "secret_key": emulator.secret_key, "port": emulator.port,
                      "endpoint": emulator.endpoint, "appid": emulator.appid, "bucket": bucket, "ranges": ranges,
                      "emulator": {"endpoint": emulator.endpoint, "secret_id": emulator.secret_id,
                                   "secret_key": emulator.secret_key}}
            large = args.large_mib * MiB
            workloads = [
                Workload("small", f"{args.small} x {args.small_kib} KiB", SMALL_PREFIX,
                         args.small * args.small_kib * 1024),
                Workload("large", f"1 x {args.large_mib} MiB", "large/", large),
            ]
            if args.connection_mbps:
                workloads.append(Workload("large", f"1 x {args.large_mib} MiB, {args.connection_mbps:g} MB/s a conn",
                                          "large/", large, int(args.connection_mbps * 1e6)))
            bench = Bench(work, common, nginx_port, emulator.port)
            for planned in workloads:
                files = [(str(p.relative_to(work / "nginx" / "root")), p.stat().st_size)
                         for p in sorted((work / "nginx" / "root" / planned.prefix).iterdir())]
                workload = dataclasses.replace(planned, files=files)
                if not workload.paced:
                    # The first reader of freshly written objects pays for the disk (4 s for 1 GiB here): one
                    # untimed pass first, then rounds in a rotating order.
                    bench.download(workload, "sdk", -1)
                else:  # every body to or from COS at this pace, per request (the emulator's slow_body)
                    emulator.admin.inject_cos("slow_body", bucket=bucket, bytes_per_second=workload.paced, count=None)
                for direction, step in (("download", bench.download), ("upload", bench.upload)):
                    # nginx paces only what it sends (limit_rate): no ceiling for a paced upload.
                    names = [n for n in contestants if not (workload.paced and direction == "upload" and n == "nginx")]
                    results = rounds(names, args.repeat, functools.partial(step, workload))
                    rows.append((f"{direction} {workload.label}", workload.name,
                                 {n: {**r, "rate": rate(workload.kind, r, args, workload.total)}
                                  for n, r in results.items()}))
                emulator.admin.clear_faults()
        finally:
            if nginx_process is not None:
                nginx_process.terminate()
                nginx_process.wait()
            if emulator.process.poll() is not None:  # it died under the run: say why before its log goes
                tail = emulator.log_path.read_text(errors="replace")[-3000:]
                print(f"the emulator exited with {emulator.process.returncode}:\n{tail}", file=sys.stderr)
            emulator.stop()
    report(rows, contestants, args)


@dataclass(frozen=True)
class Workload:
    kind: str  # "small" or "large"
    label: str
    prefix: str
    total: int  # bytes
    paced: int = 0  # bytes/s a connection may carry (0: as fast as it goes)
    files: list[tuple[str, int]] = dataclasses.field(default_factory=list)  # nginx's: path under its root, size

    @property
    def name(self) -> str:
        return self.kind + ("-paced" if self.paced else "")


@dataclass(frozen=True)
class Bench:
    work: Path
    common: dict[str, Any]
    nginx_port: int
    emulator_port: int

    def _cfg(self, workload: Workload, name: str, direction: str) -> dict[str, Any]:
        home = self.work / "coscmd-home" / f"{name}-{workload.name}-{direction}"
        home.mkdir(parents=True, exist_ok=True)
        # nginx's client: 8 ranges of 64 MiB; paced, as many connections of cvmjob's part size as cvmjob keeps.
        pieces = ({"piece": 16 * MiB, "threads": self.common["ranges"]} if workload.paced
                  else {"piece": PIECE, "threads": 8})
        return {**self.common, **pieces, "large": workload.kind == "large", "home": str(home),
                "limit_rate": workload.paced, "port": self.nginx_port if name == "nginx" else self.emulator_port}

    def download(self, workload: Workload, name: str, round_: int) -> dict[str, float]:
        dest = self.work / "dest" / f"{name}-{workload.name}-{round_}"
        dest.mkdir(parents=True)
        cfg = {**self._cfg(workload, name, "get"), "prefix": workload.prefix, "dest": str(dest),
               "files": workload.files}
        result = measure(f"{name}-download", cfg)
        count, size = folder_totals(dest)
        if size != workload.total:
            raise SystemExit(f"{name} downloaded {count} files, {size} bytes; expected {workload.total} bytes")
        # Kept until the run ends: on this VM's disk (ext4 mounted with discard) deleting one contestant's 3,000
        # files cost the next one ~4 s of system time, which halved a 3 s run and barely moved a 20 s one.
        return result

    def upload(self, workload: Workload, name: str, round_: int) -> dict[str, float]:
        cfg = {**self._cfg(workload, name, "put"), "prefix": f"up-{name}-{workload.name}-{round_}/",
               "source": str(self.work / "data" / workload.kind)}
        return measure(f"{name}-upload", cfg)


def rounds(contestants: list[str], repeat: int,
           step: Callable[[str, int], dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each contestant ``repeat`` times, the order rotated every round; the median time and the peak RSS."""
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in contestants}
    for round_ in range(repeat):
        for name in contestants[round_ % len(contestants):] + contestants[:round_ % len(contestants)]:
            seen[name].append(step(name, round_))
    return {name: {"seconds": statistics.median(r["seconds"] for r in runs), "rss_mb": max(r["rss_mb"] for r in runs)}
            for name, runs in seen.items()}


def rate(kind: str, result: dict[str, float], args: argparse.Namespace, total: int) -> float:
    return args.small / result["seconds"] if kind == "small" else total / 1e6 / result["seconds"]


def report(rows: list[tuple[str, str, dict[str, dict[str, float]]]], contestants: list[str],
           args: argparse.Namespace) -> None:
    names = ["the SDK" if n == "sdk" else n for n in contestants[1:]]
    others = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    print(f"cvmjob's sync and upload vs {others} on 127.0.0.1 ({os.cpu_count()} CPUs; "
          f"one emulator; cvmjob sized to {args.link_gbps:g} Gbps, {ranges_in_flight(args.link_gbps)} ranges; "
          f"objects/s for small, MB/s for large; median of {args.repeat} rounds)")
    header = f"{'workload':<44}" + "".join(f"{n:>9}" for n in contestants)
    ratios = [n for n in contestants if n != "cvmjob"]
    print(header + "".join(f"{'x ' + n:>10}" for n in ratios) + f"{'cvmjob RSS':>12}")
    for label, _, results in rows:
        line = f"{label:<44}" + "".join(f"{results[n]['rate']:>9.0f}" if n in results else f"{'-':>9}"
                                        for n in contestants)
        line += "".join(f"{results['cvmjob']['rate'] / results[n]['rate']:>10.2f}" if n in results else f"{'-':>10}"
                        for n in ratios)
        print(line + f"{results['cvmjob']['rss_mb']:>9.0f} MB")
    summary = {f"{label.split()[0]}_{name.replace('-', '_')}_x_{n}": results["cvmjob"]["rate"] / results[n]["rate"]
               for label, name, results in rows for n in ratios if n in results}
    peak = max(results["cvmjob"]["rss_mb"] for _, _, results in rows)
    print("sync_throughput: " + " ".join(f"{k}={v:.2f}" for k, v in summary.items()) + f" cvmjob_rss_mb={peak:.0f}")


if __name__ == "__main__":
    main()
