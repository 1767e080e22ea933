from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.state.home import state_db, store_url


def test_the_store_is_the_embedded_file_unless_cvmjob_db_names_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CVMJOB_DB", raising=False)
    assert store_url() == str(state_db()) == str(tmp_path / "home" / "state.db")
    monkeypatch.setenv("CVMJOB_DB", "postgresql://cvmjob@127.0.0.1:5432/cvmjob")
    assert store_url() == "postgresql://cvmjob@127.0.0.1:5432/cvmjob"
    monkeypatch.setenv("CVMJOB_DB", str(tmp_path / "elsewhere.db"))
    assert store_url() == str(tmp_path / "elsewhere.db")


def test_each_home_has_one_random_identity_kept_across_processes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.state.home import controller_identity

    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "a"))
    first = controller_identity()
    assert first == controller_identity() == (tmp_path / "a" / "identity").read_text().strip()
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "b"))
    assert controller_identity() != first  # same user, same host: another home is another controller
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "a"))
    assert controller_identity() == first


def test_an_identity_file_that_is_not_one_is_refused_and_left_as_it_is(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.state.home import HomeError, controller_identity

    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path))
    (tmp_path / "identity").write_text("not/an identity\n")
    with pytest.raises(HomeError, match=r"identity.*delete it"):
        controller_identity()
    assert (tmp_path / "identity").read_text() == "not/an identity\n"


def test_the_home_and_the_background_logs_are_their_owners_only(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # They hold every job's spec (train.env values included) and the trainings' output; they were 0755 and 0644.
    from orchestrator import api

    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CVMJOB_DB", raising=False)
    log = api.private_log("controller")
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
    assert log.parent.stat().st_mode & 0o777 == 0o700
    assert log.stat().st_mode & 0o777 == 0o600
