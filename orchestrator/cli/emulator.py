"""``cvmjob emulator serve``: the local Tencent Cloud, the same server as ``python -m orchestrator.emulator``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..emulator.config import DEFAULT_APPID, DEFAULT_SECRET_ID, DEFAULT_SECRET_KEY, EmulatorConfig

emulator_app = typer.Typer(no_args_is_help=True, help="The local Tencent Cloud emulator.")


@emulator_app.command()
def serve(
    state_dir: Annotated[Path, typer.Option(help="buckets, objects, images and instance records live here")],
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="0 picks a free port")] = 9000,
    secret_id: Annotated[str, typer.Option()] = DEFAULT_SECRET_ID,
    secret_key: Annotated[str, typer.Option()] = DEFAULT_SECRET_KEY,
    appid: Annotated[str, typer.Option()] = DEFAULT_APPID,
    boot_seconds: Annotated[float, typer.Option()] = 2.0,
    terminate_seconds: Annotated[float, typer.Option()] = 1.0,
    image_seconds: Annotated[float, typer.Option()] = 2.0,
    spot_notice_seconds: Annotated[float, typer.Option()] = 120.0,
    spot_reclaim_rate: Annotated[float, typer.Option(help="seeded random reclaims per spot instance-hour")] = 0.0,
    seed: Annotated[int, typer.Option()] = 0,
    clock: Annotated[str, typer.Option(help="real or manual")] = "real",
    gpus: Annotated[str, typer.Option(help="auto or none")] = "auto",
    ready_file: Annotated[Optional[Path], typer.Option()] = None,  # noqa: UP045
) -> None:
    """Serve CVM, VPC, STS, billing, COS and instance metadata on one port."""
    # Imported here: the server (aiohttp and every emulated service) cost every other `cvmjob` command a third of
    # its start-up time.
    from ..emulator.cli import serve as serve_emulator

    config = EmulatorConfig(
        state_dir=state_dir,
        host=host,
        port=port,
        secret_id=secret_id,
        secret_key=secret_key,
        appid=appid,
        boot_seconds=boot_seconds,
        terminate_seconds=terminate_seconds,
        image_seconds=image_seconds,
        spot_notice_seconds=spot_notice_seconds,
        spot_reclaim_rate=spot_reclaim_rate,
        seed=seed,
        clock=clock,
        gpus=gpus,
    )
    asyncio.run(serve_emulator(config, ready_file))
