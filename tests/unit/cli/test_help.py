"""Every command, sub-command, option and argument of ``cvmjob`` says what it is for (design.md §6.8)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.cli.main import app


def commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The command and, for a group, every command below it (hidden ones too)."""
    yield path, command
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from commands(sub, (*path, name))


def missing_help(typer_app: typer.Typer) -> list[str]:
    """``cvmjob pool grow`` for a command without help, ``cvmjob pool grow --count`` for a parameter without.

    An argument is a typer Argument, whose ``help=`` typer keeps as ``param.help``; a bare click Argument has no
    help of its own and passes when the command's help names it."""
    missing = []
    for path, command in commands(typer.main.get_command(typer_app), ("cvmjob",)):
        text = (command.help or "").strip()
        if not text:
            missing.append(" ".join(path))
        for param in command.params:
            if (getattr(param, "help", None) or "").strip():
                continue
            if param.param_type_name == "argument" and param.name and param.name.lower() in text.lower():
                continue
            missing.append(" ".join([*path, param.opts[0] if param.param_type_name == "option" else param.name]))
    return missing


def test_every_command_option_and_argument_has_help() -> None:
    assert missing_help(app) == []


def test_the_walk_reaches_every_command() -> None:
    found = {" ".join(path) for path, _ in commands(typer.main.get_command(app), ("cvmjob",))}
    assert {"cvmjob run", "cvmjob pool grow", "cvmjob pool shrink", "cvmjob emulator serve"} <= found


def test_what_has_no_help_is_named() -> None:
    bare = typer.Typer(help="an app")
    sub = typer.Typer(help="a group")
    bare.add_typer(sub, name="group")

    @bare.command()
    def spoken(
        job: Annotated[str, typer.Argument(help="the job")],
        count: Annotated[int, typer.Option(help="how many")] = 1,
    ) -> None:
        """Has help."""

    @sub.command()
    def silent(job: Annotated[str, typer.Argument()], count: Annotated[int, typer.Option()] = 1) -> None:
        pass

    @sub.command()
    def named(target: str) -> None:
        """Acts on TARGET."""

    assert missing_help(bare) == ["cvmjob group silent", "cvmjob group silent job", "cvmjob group silent --count"]


@pytest.mark.parametrize("path", [p[1:] for p, _ in commands(typer.main.get_command(app), ("cvmjob",))],
                         ids=lambda p: " ".join(p) or "cvmjob")
def test_help_renders(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "usage" in result.output.lower()
