"""``cvmjob emulator serve|seed``: the local Tencent Cloud, in cvmjob's help style. The options are parsed here and
handed to the emulator's own entry (``orchestrator.emulator.cli.run``, also behind ``python -m
orchestrator.emulator``), which imports nothing of the rest of cvmjob; tests/emulator/test_cli.py checks that the two
parsers offer the same options with the same defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from ..emulator.config import DEFAULT_APPID, DEFAULT_REGION, DEFAULT_SECRET_ID, KEY_VARIABLE
from ..extras import need
from .lazy import lazy_module, lazy_name
from .options import Output, help_options

if TYPE_CHECKING:  # loaded at first use (cli/lazy.py): `cvmjob --help` needs none of it
    from argparse import Namespace

    from .. import api
    from ..state.home import store_url
    from ..state.store import Store
    from ..target import embedded
else:
    Namespace = lazy_name("argparse", "Namespace")
    api = lazy_module("orchestrator.api")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")
    embedded = lazy_module("orchestrator.target.embedded")

emulator_app = typer.Typer(no_args_is_help=True, help="The local Tencent Cloud emulator.",
                           context_settings=help_options)

KeyFile = Annotated[Optional[Path], typer.Option(  # noqa: UP045
    "--secret-key-file", metavar="FILE", help=f"the SecretKey, in a file only you can read (else ${KEY_VARIABLE})")]
# Refused with its reason (the key on a command line is readable by every user of the host): kept out of the help.
ArgvKey = Annotated[Optional[str], typer.Option("--secret-key", hidden=True, help="refused: use --secret-key-file")]  # noqa: UP045


def _emulator(args: Namespace, secret_key: str | None = None) -> int:
    # Imported here: the emulator's modules cost every other `cvmjob` command its start-up time.
    from ..emulator.cli import run

    return run(args, secret_key)


@emulator_app.command()
def serve(
    state_dir: Annotated[Path, typer.Option(
        help="buckets, objects, images, instance records, and the SecretKey it made (DIR/secret_key); kept 0700",
        metavar="DIR")],
    host: Annotated[str, typer.Option(help="another address than loopback needs a key given on purpose")] = (
        "127.0.0.1"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="0 picks a free port (see --ready-file)")] = 9000,
    secret_id: Annotated[str, typer.Option(help="the account's SecretId")] = DEFAULT_SECRET_ID,
    secret_key_file: KeyFile = None,
    secret_key: ArgvKey = None,
    seed_root: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        metavar="DIR", help="`seed` reads only folders under DIR (repeatable; default: the directory it runs in)",
    )] = None,
    appid: Annotated[str, typer.Option(help="the account's APPID (bucket names end with it)")] = DEFAULT_APPID,
    boot_seconds: Annotated[float, typer.Option(help="PENDING to RUNNING")] = 2.0,
    terminate_seconds: Annotated[float, typer.Option(help="SHUTTING-DOWN to gone")] = 1.0,
    image_seconds: Annotated[float, typer.Option(help="CreateImage's CREATING to NORMAL")] = 2.0,
    driver_install_seconds: Annotated[float, typer.Option(
        help="how long the GPU driver's auto-install takes (Tencent's: about 600)")] = 1.0,
    spot_notice_seconds: Annotated[float, typer.Option(help="a spot reclaim's notice before termination")] = 120.0,
    spot_reclaim_rate: Annotated[float, typer.Option(
        help="seeded random reclaims per spot instance-hour (default 0: only by admin call)")] = 0.0,
    seed: Annotated[int, typer.Option(help="the random reclaims' seed")] = 0,
    clock: Annotated[Literal["real", "manual"], typer.Option(
        help="real, or manual: time moves only by the admin API's advance")] = "real",
    gpus: Annotated[Literal["auto", "none"], typer.Option(
        help="auto: instances get this host's GPUs when nvidia-smi lists some; none: CPU only")] = "auto",
    user_data: Annotated[bool, typer.Option(
        "--user-data/--no-user-data", help="instances run their UserData; --no-user-data for load tests: they "
                                           "boot (PENDING -> RUNNING, billed, reclaimed) without running any process",
    )] = True,
    state_save_seconds: Annotated[float, typer.Option(
        help="load tests: write the state file at most this often (default 0: after every change)")] = 0.0,
    ready_file: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        metavar="FILE", help="write {endpoint, secret_id, ...} here once listening")] = None,
) -> None:
    """Serve CVM, VPC, STS, billing, COS and instance metadata on one port, until SIGTERM or Ctrl-C. Its SecretKey:
    --secret-key-file, else $TENCENTCLOUD_EMULATOR_SECRET_KEY, else DIR/secret_key, made at the first start."""
    need("emulator", "jwt", "cryptography")
    args = Namespace(
        command="serve", host=host, port=port, state_dir=state_dir, secret_id=secret_id,
        secret_key_file=secret_key_file, secret_key=secret_key, seed_root=seed_root, appid=appid,
        boot_seconds=boot_seconds, terminate_seconds=terminate_seconds, image_seconds=image_seconds,
        driver_install_seconds=driver_install_seconds, spot_notice_seconds=spot_notice_seconds,
        spot_reclaim_rate=spot_reclaim_rate, seed=seed, clock=clock, gpus=gpus, run_user_data=user_data,
        state_save_seconds=state_save_seconds, ready_file=ready_file,
    )
    raise typer.Exit(_emulator(args))


@emulator_app.command()
def seed(
    folder: Annotated[Path, typer.Argument(help="read by the emulator: on its machine, under its --seed-root")],
    destination: Annotated[str, typer.Argument(
        metavar="cos://BUCKET/PREFIX/", help="BUCKET is name-APPID; PREFIX may be empty")],
    endpoint: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="HOST:PORT", help="the running emulator (default: $CVMJOB_ENDPOINT, else the embedded one)")] = None,
    secret_key_file: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--secret-key-file", metavar="FILE",
        help=f"the emulator's SecretKey (its admin key): its STATE_DIR/secret_key, or set ${KEY_VARIABLE}")] = None,
    secret_key: ArgvKey = None,
    region: Annotated[str, typer.Option(help="where the bucket is created if it is missing")] = DEFAULT_REGION,
    force: Annotated[bool, typer.Option("--force", help="seed even if the prefix already holds objects")] = False,
    output: Output = "text",
) -> None:
    """Copy a local folder into a bucket of the emulator, for examples. The emulator is the one at --endpoint, else
    at $CVMJOB_ENDPOINT, else the embedded one (started for this, and reading folders under your home directory or
    the directory you run this in)."""

    def seeded(at: str, key: str | None) -> int:
        return _emulator(Namespace(
            command="seed", endpoint=at, secret_key_file=secret_key_file, secret_key=secret_key, region=region,
            force=force, folder=folder, destination=destination, output=output), key)

    if endpoint:
        raise typer.Exit(seeded(endpoint, None))
    from_environment = os.environ.get("CVMJOB_ENDPOINT")
    if from_environment:
        # The admin API takes the account's SecretKey, which a user of CVMJOB_ENDPOINT has in the usual variable;
        # handed over in this process, not as an argument.
        raise typer.Exit(seeded(from_environment, os.environ.get("TENCENTCLOUD_SECRET_KEY")))
    try:
        local = embedded.ensure_running()
    except embedded.EmulatorDidNotStart as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        code = seeded(local.endpoint, local.secret_key)
    except embedded.EmulatorDidNotStart as exc:  # its key file unreadable
        typer.echo(f"error: {exc}", err=True)
        code = 2
    finally:
        api.release_embedded(Store(store_url()))  # the seeded objects stay in its state directory
    raise typer.Exit(code)
