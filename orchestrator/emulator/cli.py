"""``python -m orchestrator.emulator serve|seed`` and ``cvmjob emulator serve|seed``: one parser for both.

``seed`` copies a local folder into a bucket of a running emulator (example data), through the admin API
(admin/routes.py ``POST seed``); bad input is one ``error: ...`` line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path

from .client import AdminClient, AdminError
from .config import DEFAULT_APPID, DEFAULT_REGION, DEFAULT_SECRET_ID, DEFAULT_SECRET_KEY, EmulatorConfig
from .server import CannotListen, start

COS_URL = "cos://"


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: 0-65535 (0 picks a free one)")
    return int(text)


def parser(prog: str = "python -m orchestrator.emulator") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="A local Tencent Cloud.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve CVM, VPC, STS, billing, COS and metadata on one port")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=_port, default=9000, help="0 picks a free port (see --ready-file)")
    s.add_argument("--state-dir", type=Path, required=True, help="buckets, objects, images, instance records")
    s.add_argument("--secret-id", default=DEFAULT_SECRET_ID)
    s.add_argument("--secret-key", default=DEFAULT_SECRET_KEY)
    s.add_argument("--appid", default=DEFAULT_APPID)
    s.add_argument("--boot-seconds", type=float, default=2.0)
    s.add_argument("--terminate-seconds", type=float, default=1.0)
    s.add_argument("--image-seconds", type=float, default=2.0)
    s.add_argument("--spot-notice-seconds", type=float, default=120.0)
    s.add_argument(
        "--spot-reclaim-rate",
        type=float,
        default=0.0,
        help="seeded random reclaims per spot instance-hour (default 0: only by admin call)",
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--clock", choices=("real", "manual"), default="real")
    s.add_argument("--gpus", choices=("auto", "none"), default="auto")
    s.add_argument(
        "--no-user-data",
        dest="run_user_data",
        action="store_false",
        help="load tests: instances boot (PENDING -> RUNNING, billed, reclaimed) without running any process",
    )
    s.add_argument(
        "--state-save-seconds",
        type=float,
        default=0.0,
        help="load tests: write the state file at most this often (default 0: after every change)",
    )
    s.add_argument("--ready-file", type=Path, help="write {endpoint, secret_id, ...} here once listening")
    d = sub.add_parser("seed", help="copy a local folder into a bucket of a running emulator (example data)")
    d.add_argument("--endpoint", required=True, help="HOST:PORT of the running emulator")
    d.add_argument("--secret-key", default=DEFAULT_SECRET_KEY, help="the emulator's SecretKey (its admin key)")
    d.add_argument("--region", default=DEFAULT_REGION, help="where the bucket is created if it is missing")
    d.add_argument("--force", action="store_true", help="seed even if the prefix already holds objects")
    d.add_argument("folder", type=Path, metavar="FOLDER", help="read by the emulator: on its machine")
    d.add_argument("destination", metavar="cos://BUCKET/PREFIX/", help="BUCKET is name-APPID; PREFIX may be empty")
    return p


def config_from(args: argparse.Namespace) -> EmulatorConfig:
    return EmulatorConfig(
        state_dir=args.state_dir,
        host=args.host,
        port=args.port,
        secret_id=args.secret_id,
        secret_key=args.secret_key,
        appid=args.appid,
        boot_seconds=args.boot_seconds,
        terminate_seconds=args.terminate_seconds,
        image_seconds=args.image_seconds,
        spot_notice_seconds=args.spot_notice_seconds,
        spot_reclaim_rate=args.spot_reclaim_rate,
        seed=args.seed,
        clock=args.clock,
        gpus=args.gpus,
        run_user_data=args.run_user_data,
        state_save_seconds=args.state_save_seconds,
    )


async def serve(config: EmulatorConfig, ready_file: Path | None = None) -> None:
    runner, config = await start(config)
    info = {
        "endpoint": config.endpoint,
        "secret_id": config.secret_id,
        "appid": config.appid,
        "state_dir": str(config.state_dir),
    }
    print(
        f"Local Tencent Cloud listening on http://{config.endpoint} (state in {config.state_dir}); "
        f"SecretId {config.secret_id}, APPID {config.appid}",
        flush=True,
    )
    if ready_file is not None:
        tmp = ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def seed(args: argparse.Namespace) -> int:
    bucket, _, prefix = args.destination.removeprefix(COS_URL).partition("/")
    if not args.destination.startswith(COS_URL) or not bucket:
        sys.stderr.write(f"error: {args.destination!r} is not cos://BUCKET/PREFIX/\n")
        return 2
    url = f"{COS_URL}{bucket}/{prefix}"
    try:
        done = AdminClient(args.endpoint, args.secret_key).seed(
            bucket, prefix, args.folder.absolute(), only_if_empty=not args.force, region=args.region
        )
    except AdminError as exc:
        sys.stderr.write(f"error: {exc.detail}\n")
        return 2
    except OSError as exc:  # urllib's URLError included: refused, unreachable, timed out
        sys.stderr.write(f"error: cannot reach the emulator at {args.endpoint}: {getattr(exc, 'reason', exc)}\n")
        return 2
    if done["skipped"]:
        print(f"{url} already holds objects: nothing seeded (--force to seed anyway)")
    else:
        print(f"seeded {done['files']} files ({done['bytes']} bytes) into {url}")
    return 0


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = (parser(prog) if prog else parser()).parse_args(argv)
    if args.command == "seed":
        return seed(args)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        asyncio.run(serve(config_from(args), args.ready_file))
    except CannotListen as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
