"""``cvmjob emulator serve|seed``: the local Tencent Cloud, the very server and parser of
``python -m orchestrator.emulator`` (their options are listed by ``cvmjob emulator serve --help`` and
``cvmjob emulator seed --help``)."""

from __future__ import annotations

import os

import typer

from .. import api
from ..state.home import store_url
from ..state.store import Store
from ..target import embedded

emulator_app = typer.Typer(no_args_is_help=True, help="The local Tencent Cloud emulator.")

_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _emulator_main(argv: list[str], secret_key: str | None = None) -> int:
    # Imported here: the server (aiohttp and every emulated service) cost every other `cvmjob` command a third of
    # its start-up time.
    from ..emulator.cli import main

    return main(argv, prog="cvmjob emulator", secret_key=secret_key)


@emulator_app.command(context_settings=_PASS_THROUGH, add_help_option=False)
def serve(ctx: typer.Context) -> None:
    """Serve CVM, VPC, STS, billing, COS and instance metadata on one port (--state-dir DIR [--port P] ...).
    Its SecretKey: DIR/secret_key, made at the first start (or --secret-key-file, or
    TENCENTCLOUD_EMULATOR_SECRET_KEY); `seed` reads only under --seed-root DIR (default: where it runs)."""
    raise typer.Exit(_emulator_main(["serve", *ctx.args]))


@emulator_app.command(context_settings=_PASS_THROUGH, add_help_option=False)
def seed(ctx: typer.Context) -> None:
    """Copy a local folder into a bucket of the emulator, for examples (FOLDER cos://BUCKET/PREFIX/ [--force]).
    The emulator is the one at --endpoint, else at CVMJOB_ENDPOINT, else the embedded one (started for this, and
    reading folders under your home directory or the directory you run this in)."""
    args = list(ctx.args)
    if "-h" in args or "--help" in args or any(a == "--endpoint" or a.startswith("--endpoint=") for a in args):
        raise typer.Exit(_emulator_main(["seed", *args]))
    endpoint = os.environ.get("CVMJOB_ENDPOINT")
    if endpoint:
        # The admin API takes the account's SecretKey, which a user of CVMJOB_ENDPOINT has in the usual variable;
        # handed over in this process, not as an argument.
        raise typer.Exit(
            _emulator_main(["seed", "--endpoint", endpoint, *args], os.environ.get("TENCENTCLOUD_SECRET_KEY"))
        )
    try:
        local = embedded.ensure_running()
    except embedded.EmulatorDidNotStart as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        code = _emulator_main(["seed", "--endpoint", local.endpoint, *args], local.secret_key)
    except embedded.EmulatorDidNotStart as exc:  # its key file unreadable
        typer.echo(f"error: {exc}", err=True)
        code = 2
    finally:
        api.release_embedded(Store(store_url()))  # the seeded objects stay in its state directory
    raise typer.Exit(code)
