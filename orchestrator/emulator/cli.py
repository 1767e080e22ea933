"""``python -m orchestrator.emulator serve|seed``, and what ``cvmjob emulator serve|seed`` (typer, in
orchestrator/cli/emulator.py) calls with the options it parsed: ``run(Namespace)``, the same fields as this parser's.

``seed`` copies a local folder into a bucket of a running emulator (example data), through the admin API
(admin/routes.py ``POST seed``); bad input is one ``error: ...`` line on stderr and exit status 2.

The SecretKey is never an argument (keys.py says why and where it comes from); ``serve`` listens on loopback unless
it was given a key on purpose, and seeds only from folders under its ``--seed-root`` (default: where it runs)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import signal
import sys
from pathlib import Path

from .client import AdminClient, AdminError
from .config import DEFAULT_APPID, DEFAULT_REGION, DEFAULT_SECRET_ID, KEY_VARIABLE, EmulatorConfig
from .keys import Key, KeyProblem, find_key, read_key_file

COS_URL = "cos://"


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: 0-65535 (0 picks a free one)")
    return int(text)


def parser(prog: str = "python -m orchestrator.emulator") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="A local Tencent Cloud.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve CVM, VPC, STS, billing, COS and metadata on one port")
    s.add_argument(
        "--host", default="127.0.0.1", help="another address than loopback needs a key given on purpose"
    )
    s.add_argument("--port", type=_port, default=9000, help="0 picks a free port (see --ready-file)")
    s.add_argument(
        "--state-dir", type=Path, required=True,
        help="buckets, objects, images, instance records, and the SecretKey it made (DIR/secret_key); kept 0700",
    )
    s.add_argument("--secret-id", default=DEFAULT_SECRET_ID)
    s.add_argument(
        "--secret-key-file", type=Path, metavar="FILE",
        help=f"the SecretKey, in a file only you can read (else ${KEY_VARIABLE}, else a random one in the state "
        "directory)",
    )
    s.add_argument("--secret-key", help=argparse.SUPPRESS)  # refused: see _argv_key()
    s.add_argument(
        "--seed-root", type=Path, action="append", metavar="DIR",
        help="`seed` reads only folders under DIR (repeatable; default: the directory it runs in)",
    )
    s.add_argument("--appid", default=DEFAULT_APPID)
    s.add_argument("--boot-seconds", type=float, default=2.0)
    s.add_argument("--terminate-seconds", type=float, default=1.0)
    s.add_argument("--image-seconds", type=float, default=2.0)
    s.add_argument("--driver-install-seconds", type=float, default=1.0,
                   help="how long the GPU driver's auto-install takes (Tencent's: about 600)")
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
    d.add_argument(
        "--secret-key-file", type=Path, metavar="FILE",
        help=f"the emulator's SecretKey (its admin key): its STATE_DIR/secret_key, or set ${KEY_VARIABLE}",
    )
    d.add_argument("--secret-key", help=argparse.SUPPRESS)  # refused: see _argv_key()
    d.add_argument("--region", default=DEFAULT_REGION, help="where the bucket is created if it is missing")
    d.add_argument("--force", action="store_true", help="seed even if the prefix already holds objects")
    d.add_argument("--output", "-o", choices=("text", "json"), default="text", help="text or json")
    d.add_argument(
        "folder", type=Path, metavar="FOLDER", help="read by the emulator: on its machine, under its --seed-root"
    )
    d.add_argument("destination", metavar="cos://BUCKET/PREFIX/", help="BUCKET is name-APPID; PREFIX may be empty")
    return p


class Refused(ValueError):
    """Options that would hand the emulator's user to others; the message says what to do instead."""


def _argv_key(args: argparse.Namespace) -> None:
    if args.secret_key is not None:
        raise Refused(
            "--secret-key puts the key where every user of this host reads it (ps): put it in a file only you can "
            f"read and pass --secret-key-file FILE, or set {KEY_VARIABLE}"
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _exposure(args: argparse.Namespace, given: bool) -> None:
    """Beyond loopback, whoever reaches the port and holds the key runs code as this user: only with a key its
    operator chose and keeps (a made one is read from the state directory by local clients only)."""
    if not is_loopback(args.host) and not given:
        raise Refused(
            f"--host {args.host} is not a loopback address: the emulator then serves anyone who reaches it, and its "
            "key runs code as this user; give it a key of your own on purpose (--secret-key-file FILE or "
            f"{KEY_VARIABLE}), or leave --host at 127.0.0.1"
        )


def serve_key(args: argparse.Namespace) -> Key:
    """The key ``serve`` runs with (keys.py); the variable is then dropped, so that no child inherits it."""
    _argv_key(args)
    _exposure(args, args.secret_key_file is not None or bool(os.environ.get(KEY_VARIABLE)))
    key = find_key(args.state_dir, args.secret_key_file, os.environ)
    os.environ.pop(KEY_VARIABLE, None)
    return key


def config_from(args: argparse.Namespace, secret_key: str) -> EmulatorConfig:
    return EmulatorConfig(
        state_dir=args.state_dir,
        host=args.host,
        port=args.port,
        seed_roots=tuple(root.resolve() for root in (args.seed_root or [Path.cwd()])),
        secret_id=args.secret_id,
        secret_key=secret_key,
        appid=args.appid,
        boot_seconds=args.boot_seconds,
        terminate_seconds=args.terminate_seconds,
        image_seconds=args.image_seconds,
        driver_install_seconds=args.driver_install_seconds,
        spot_notice_seconds=args.spot_notice_seconds,
        spot_reclaim_rate=args.spot_reclaim_rate,
        seed=args.seed,
        clock=args.clock,
        gpus=args.gpus,
        run_user_data=args.run_user_data,
        state_save_seconds=args.state_save_seconds,
    )


async def serve(config: EmulatorConfig, key_file: Path | None, ready_file: Path | None = None) -> None:
    """``key_file``: where its clients read the key (None: given in the environment), said in the ready file."""
    from .server import start  # the server's modules (aiohttp, PyJWT) only where it serves: `seed` is a client

    runner, config = await start(config)
    info = {
        "endpoint": config.endpoint,
        "secret_id": config.secret_id,
        "secret_key_file": None if key_file is None else str(key_file.absolute()),
        "appid": config.appid,
        "state_dir": str(config.state_dir),
    }
    where = f"in {key_file}" if key_file is not None else f"from ${KEY_VARIABLE}"
    print(
        f"Local Tencent Cloud listening on http://{config.endpoint} (state in {config.state_dir}); "
        f"SecretId {config.secret_id}, SecretKey {where}, APPID {config.appid}; seeds from "
        f"{', '.join(map(str, config.seed_roots))}",
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


def seed_key(args: argparse.Namespace, secret_key: str | None) -> str:
    """``--secret-key-file``, else the key of the caller (``cvmjob emulator seed``: the embedded emulator's, or
    TENCENTCLOUD_SECRET_KEY with CVMJOB_ENDPOINT), else the environment's."""
    _argv_key(args)
    if args.secret_key_file is not None:
        return read_key_file(args.secret_key_file)
    found = secret_key or os.environ.get(KEY_VARIABLE)
    if not found:
        raise Refused(
            f"no key for the emulator at {args.endpoint}: pass --secret-key-file STATE_DIR/secret_key (the state "
            f"directory it was started with) or set {KEY_VARIABLE}"
        )
    return found


def seed(args: argparse.Namespace, secret_key: str | None = None) -> int:
    bucket, _, prefix = args.destination.removeprefix(COS_URL).partition("/")
    if not args.destination.startswith(COS_URL) or not bucket:
        sys.stderr.write(f"error: {args.destination!r} is not cos://BUCKET/PREFIX/\n")
        return 2
    url = f"{COS_URL}{bucket}/{prefix}"
    try:
        key = seed_key(args, secret_key)
    except (Refused, KeyProblem) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    try:
        done = AdminClient(args.endpoint, key).seed(
            bucket, prefix, args.folder.absolute(), only_if_empty=not args.force, region=args.region
        )
    except AdminError as exc:
        sys.stderr.write(f"error: {exc.detail}\n")
        return 2
    except OSError as exc:  # urllib's URLError included: refused, unreachable, timed out
        sys.stderr.write(f"error: cannot reach the emulator at {args.endpoint}: {getattr(exc, 'reason', exc)}\n")
        return 2
    if args.output == "json":
        print(json.dumps({"destination": url, "seeded": not done["skipped"], "files": done["files"],
                          "bytes": done["bytes"]}))
    elif done["skipped"]:
        print(f"{url} already holds objects: nothing seeded (--force to seed anyway)")
    else:
        print(f"seeded {done['files']} files ({done['bytes']} bytes) into {url}")
    return 0


def main(argv: list[str] | None = None, prog: str | None = None, secret_key: str | None = None) -> int:
    """``secret_key``: the key a calling program holds (``seed`` only; never from a command line)."""
    return run((parser(prog) if prog else parser()).parse_args(argv), secret_key)


def run(args: argparse.Namespace, secret_key: str | None = None) -> int:
    """``args``: what ``parser()`` makes of a command line (``command`` "serve" or "seed" and its options)."""
    if args.command == "seed":
        return seed(args, secret_key)
    from .server import CannotListen

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        key = serve_key(args)
        asyncio.run(serve(config_from(args, key.secret), key.file, args.ready_file))
    except (Refused, KeyProblem, CannotListen) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
