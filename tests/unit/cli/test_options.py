"""The CLI's shell (orchestrator/cli/options.py and main's callback): `--version`, `-h` everywhere, shell
completion, and `--output` a choice the parser itself refuses (exit 2, before any command runs)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.main import app, main
from orchestrator.cli.options import Abort, Output, check_output


def cvmjob(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_version_is_the_installed_distribution_s() -> None:
    done = cvmjob("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"cvmjob {version('cvmjob')}\n", "")


@pytest.mark.parametrize("path", [(), ("run",), ("sweep",), ("sweep", "run"), ("emulator", "seed"),
                                  ("controller", "status")])
def test_dash_h_is_help_at_every_level(path: tuple[str, ...]) -> None:
    short, long = (CliRunner().invoke(app, [*path, flag], prog_name="cvmjob") for flag in ("-h", "--help"))
    assert short.exit_code == 0 and short.output == long.output
    assert short.output.startswith(f"Usage: cvmjob {' '.join(path)}".rstrip())


def test_shell_completion_is_offered() -> None:
    shown = CliRunner().invoke(app, ["--help"]).output
    assert "--install-completion" in shown and "--show-completion" in shown


@pytest.mark.parametrize("argv", [["status", "-o", "yaml"], ["plan", "job.yaml", "--output", "yaml"],
                                  ["ls", "--output=xml"], ["sweep", "ls", "-o", "csv"]])
def test_an_output_other_than_text_or_json_is_a_usage_error(argv: list[str]) -> None:
    done = cvmjob(*argv)
    assert done.returncode == 2, done.stderr
    assert "Invalid value for '--output' / '-o'" in done.stderr and "'text', 'json'" in done.stderr
    assert "Traceback" not in done.stderr


def test_output_is_a_plain_string_to_the_command() -> None:
    seen: list[object] = []
    probe = typer.Typer()

    @probe.command()
    def show(output: Output = "text") -> None:
        seen.append(output)

    assert CliRunner().invoke(probe, ["-o", "json"]).exit_code == 0
    assert seen == ["json"] and type(seen[0]) is str


def test_check_output_still_refuses_what_a_caller_passes() -> None:
    check_output("json")
    with pytest.raises(Abort, match="--output must be text or json, not 'yaml'"):
        check_output("yaml")


def test_main_s_usage_says_cvmjob(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["status", "-o", "yaml"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("Usage: cvmjob status [OPTIONS]")
