"""What the CLI's commands share: common options, and the one way a command refuses its input."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import EXIT_BAD_INPUT, CvmjobError

Output = Annotated[str, typer.Option("--output", "-o", help="text or json")]
Emulator = Annotated[bool, typer.Option("--emulator", help="use the local emulator even if credentials exist")]


class Abort(CvmjobError):
    """A command's refusal: one error line (main prints it) and its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code


def check_output(output: str) -> None:
    if output not in ("text", "json"):
        raise Abort(f"--output must be text or json, not {output!r}", EXIT_BAD_INPUT)
