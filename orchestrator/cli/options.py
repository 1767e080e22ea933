"""What the CLI's commands share: common options, and the one way a command refuses its input."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from ..errors import EXIT_BAD_INPUT, CvmjobError

# A choice the parser itself checks: `-o yaml` is a usage error (exit 2) before a command runs; the value stays a
# plain str, so `output == "json"` holds wherever it is passed on.
OUTPUTS = ("text", "json")
Output = Annotated[Literal["text", "json"], typer.Option("--output", "-o", help="text or json")]
Emulator = Annotated[bool, typer.Option("--emulator", help="use the local emulator even if credentials exist")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="start without asking (a terminal is asked to confirm the "
                                                       "estimate; scripts, pipes and CI never are)")]

# Every command and group of cvmjob: `-h` is `--help` (click hands a context's settings down to its subcommands).
help_options: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class Abort(CvmjobError):
    """A command's refusal: one error line (main prints it) and its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code


def check_output(output: str) -> None:
    """For callers other than the parser (which already refuses anything but text and json)."""
    if output not in OUTPUTS:
        raise Abort(f"--output must be text or json, not {output!r}", EXIT_BAD_INPUT)


def installed_version() -> str:
    """The installed distribution's version (its metadata: no import of the package's modules)."""
    from importlib.metadata import PackageNotFoundError, version  # here: a sixth of `cvmjob --help`'s start-up

    try:
        return version("cvmjob")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"cvmjob {installed_version()}")
        raise typer.Exit(0)


version_option = typer.Option(
    "--version", callback=_print_version, is_eager=True, expose_value=True, help="print cvmjob's version and exit"
)
