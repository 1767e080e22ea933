"""`cvmjob emulator serve|seed` (typer, in cvmjob's help style, calling the emulator's own entry that `python -m
orchestrator.emulator` parses for with argparse): it serves until SIGTERM, a port it cannot have is one clear error,
and the two parsers offer the same options with the same defaults."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from orchestrator.cli import emulator as typer_side
from orchestrator.emulator import cli as argparse_side
from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.launcher import proxy_free_environment
from tests.waiting import wait_until


def cvmjob_emulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main", "emulator", "serve", *args]


def test_serves_until_sigterm_and_refuses_a_port_it_cannot_have(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    server = subprocess.Popen(
        cvmjob_emulator("--port", "0", "--state-dir", str(tmp_path / "state"), "--ready-file", str(ready)),
        env=proxy_free_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        info = wait_until("the ready file", lambda: ready.exists() and json.loads(ready.read_text()), 30)
        endpoint = info["endpoint"]
        assert AdminClient(endpoint, (tmp_path / "state" / "secret_key").read_text().strip()).health()["ok"]
        taken = subprocess.run(cvmjob_emulator("--port", endpoint.split(":")[1], "--state-dir", str(tmp_path / "b")),
                               capture_output=True, text=True, timeout=60, check=False)
        assert taken.returncode == 2
        assert taken.stderr == f"error: cannot listen on {endpoint}: Address already in use\n"
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()


def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(cvmjob_emulator("--port", "99999", "--state-dir", str(tmp_path)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "Invalid value for '--port': Input should be less than or equal to 65535" in done.stderr
    assert done.stderr.startswith("Usage: cvmjob emulator serve [OPTIONS]")
    assert "Traceback" not in done.stderr


def options(parser: argparse.ArgumentParser) -> dict[str, object]:
    """Each option's destination and default, as argparse fills a namespace (positionals too)."""
    return {a.dest: a.default for a in parser._actions if a.dest not in ("help",)}


def typer_options(command: typer.models.CommandInfo) -> dict[str, object]:
    found = {}
    for param in typer.main.get_command_from_info(command, pretty_exceptions_short=True,
                                                   rich_markup_mode=None).params:
        found[param.name] = param.default
    return found


@pytest.mark.parametrize("name", ["serve", "seed"])
def test_cvmjob_s_parser_and_the_emulator_s_offer_the_same_options_and_defaults(name: str) -> None:
    sub = next(a for a in argparse_side.parser()._actions if isinstance(a, argparse._SubParsersAction))
    expected = options(sub.choices[name])
    command = next(c for c in typer_side.emulator_app.registered_commands if c.callback.__name__ == name)
    found = typer_options(command)
    renamed = {"user_data": "run_user_data"}  # --user-data/--no-user-data: argparse has the negative flag only
    found = {renamed.get(k, k): v for k, v in found.items()}
    if name == "seed":  # optional here: CVMJOB_ENDPOINT or the embedded emulator stand in for it
        assert expected.pop("endpoint") is None and found.pop("endpoint") is None
    assert {k: (None if v in ((), []) else v) for k, v in found.items()} == expected


def test_seed_s_usage_shows_endpoint_as_optional() -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "emulator", "seed", "-h"],
                          capture_output=True, text=True, timeout=60, check=True)
    usage = done.stdout.split("\n\n")[0]
    assert usage.startswith("Usage: cvmjob emulator seed [OPTIONS] ") and "--endpoint" not in usage
    assert "--endpoint HOST:PORT" in done.stdout and "[required]" not in done.stdout.split("--endpoint")[1][:120]

