"""Whose controller died: only a holder of this home (its persisted identity), whose process is gone, is known dead
here; the same ``$USER@hostname`` from another CVMJOB_HOME (a CI runner, a second checkout) is another's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.state.home import died_here
from tests.emulator_process import clean_env

REPO = Path(__file__).resolve().parents[3]


def exited_holder(home: Path) -> str:
    """The lease holder's name of a controller process of ``home`` that has exited since."""
    env = {**clean_env(), "CVMJOB_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", "from orchestrator.state.home import controller_name as n; "
                           "print(n())"], env=env, cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def test_a_holder_of_this_home_whose_process_is_gone_died_here(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "a"))
    assert died_here(exited_holder(tmp_path / "a"))


def test_a_holder_of_another_home_with_the_same_owner_is_not_known_dead(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    other = exited_holder(tmp_path / "b")
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "a"))
    assert not died_here(other)
    assert not died_here("someone@elsewhere/123/abcdef12")  # an older release's name: cannot tell
