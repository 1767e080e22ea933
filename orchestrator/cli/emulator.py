"""``cvmjob emulator serve``: the local Tencent Cloud, the very server and parser of ``python -m orchestrator.emulator``
(its options are listed by ``cvmjob emulator serve --help``)."""

from __future__ import annotations

import typer

emulator_app = typer.Typer(no_args_is_help=True, help="The local Tencent Cloud emulator.")


@emulator_app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def serve(ctx: typer.Context) -> None:
    """Serve CVM, VPC, STS, billing, COS and instance metadata on one port (--state-dir DIR [--port P] ...)."""
    # Imported here: the server (aiohttp and every emulated service) cost every other `cvmjob` command a third of
    # its start-up time.
    from ..emulator.cli import main

    raise typer.Exit(main(["serve", *ctx.args], prog="cvmjob emulator"))
