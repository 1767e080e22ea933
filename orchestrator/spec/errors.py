"""The one exception a spec or policy file produces: every problem as one line, pointing at file and field."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import CvmjobError


@dataclass(frozen=True)
class Problem:
    """One thing wrong: where (a file, ``file:line:col`` or a ``--set`` argument), which field, and what to do."""

    source: str
    path: str  # dotted field path such as ``data.0.target``; "" when the problem is not about one field
    message: str  # what is wrong, then how to fix it

    def __str__(self) -> str:
        parts = (self.source, self.path, self.message) if self.path else (self.source, self.message)
        return ": ".join(_one_line(part) for part in parts)


def _one_line(text: str) -> str:
    """``text`` with control characters escaped: a field named "a\rb" must not split its problem's line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class SpecError(CvmjobError, ValueError):
    """A job spec or policy that cannot be used. ``str()`` is one line per problem, never a traceback."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))

    @classmethod
    def single(cls, source: str, message: str, path: str = "") -> SpecError:
        return cls([Problem(source, path, message)])
