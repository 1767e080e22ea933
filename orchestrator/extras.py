"""What only some users install (pyproject.toml's extras), asked for where it is first needed: a missing extra is
one error line naming the command that installs it (exit 2), never an ImportError's traceback."""

from __future__ import annotations

import importlib

from .errors import EXIT_BAD_INPUT, CvmjobError

# Each extra of pyproject.toml and who needs it, as the error line says it ("<who> need(s) the <extra> extra").
EXTRAS = {
    "sweep": "sweeps need",
    "report": "sweep reports and bench charts need",
    "postgres": "PostgreSQL stores need",
    "emulator": "the local Tencent Cloud emulator needs",
    "train": "trainings on this machine need",
}


class MissingExtra(CvmjobError):
    exit_code = EXIT_BAD_INPUT

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(f"{EXTRAS[extra]} the {extra} extra: pip install 'cvmjob[{extra}]' (no module named "
                         f"{module!r})")
        self.extra = extra
        self.module = module


def need(extra: str, *modules: str) -> None:
    """Import ``modules`` (which ``extra`` installs) now, or raise MissingExtra; the caller then imports them as
    usual (a broken install of the extra counts as missing: installing it again is the fix)."""
    if extra not in EXTRAS:
        raise ValueError(f"no extra {extra!r} in pyproject.toml: {', '.join(EXTRAS)}")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtra(extra, module) from None
