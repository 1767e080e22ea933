from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.home import state_db, store_url


def test_the_store_is_the_embedded_file_unless_cvmjob_db_names_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CVMJOB_DB", raising=False)
    assert store_url() == str(state_db()) == str(tmp_path / "home" / "state.db")
    monkeypatch.setenv("CVMJOB_DB", "postgresql://cvmjob@127.0.0.1:5432/cvmjob")
    assert store_url() == "postgresql://cvmjob@127.0.0.1:5432/cvmjob"
    monkeypatch.setenv("CVMJOB_DB", str(tmp_path / "elsewhere.db"))
    assert store_url() == str(tmp_path / "elsewhere.db")
