from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent.sync import plan, relative_path
from orchestrator.providers.tencent.storage import ObjectInfo

PREFIX = "datasets/x/"


def obj(rel: str, size: int, etag: str) -> ObjectInfo:
    return ObjectInfo(PREFIX + rel, size, etag)


def test_unchanged_objects_are_kept_changed_and_new_ones_downloaded_deleted_ones_removed(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"1234")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"12")
    (tmp_path / "gone.bin").write_bytes(b"1")
    index: dict[str, dict[str, object]] = {
        "a.bin": {"size": 4, "etag": "e1"},
        "sub/b.bin": {"size": 2, "etag": "old"},
        "gone.bin": {"size": 1, "etag": "e3"},
    }
    listing = [obj("a.bin", 4, "e1"), obj("sub/b.bin", 2, "new"), obj("c.bin", 7, "e4"), obj("folder/", 0, "")]
    result = plan(PREFIX, listing, index, tmp_path)
    assert [o.key for o in result.keep] == [PREFIX + "a.bin"]
    assert [o.key for o in result.download] == [PREFIX + "sub/b.bin", PREFIX + "c.bin"]
    assert result.remove == ["gone.bin"]
    assert result.bytes_total == 13


def test_an_indexed_file_that_is_missing_or_truncated_locally_is_downloaded_again(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"12")
    index: dict[str, dict[str, object]] = {"a.bin": {"size": 4, "etag": "e"}, "b.bin": {"size": 1, "etag": "e"}}
    result = plan(PREFIX, [obj("a.bin", 4, "e"), obj("b.bin", 1, "e")], index, tmp_path)
    assert len(result.download) == 2 and result.keep == []


@pytest.mark.parametrize("key", [PREFIX + "../escape", PREFIX + "a/../../b", PREFIX + "/abs", PREFIX])
def test_keys_that_would_leave_the_target_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="cannot be placed"):
        relative_path(PREFIX, key)
