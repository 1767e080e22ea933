"""A public image's python3, as its operating system ships it: the agent needs 3.10 or later."""

from __future__ import annotations

import pytest

from orchestrator.plan.images import shipped_python, too_old


@pytest.mark.parametrize(("os_name", "python"), [
    ("Ubuntu Server 20.04 LTS 64bit", (3, 8)), ("Ubuntu Server 22.04 LTS 64bit", (3, 10)),
    ("Ubuntu Server 24.04 LTS 64bit", (3, 12)), ("TencentOS Server 3.1 (TK4)", (3, 6)),
    ("CentOS 7.9 64bit", (3, 6)), ("Debian 12.4 64bit", (3, 11)), ("OpenCloudOS 9.0", (3, 11)),
    ("Windows Server 2022", None), ("my-own-image", None),
])
def test_each_known_release_ships_its_own_python(os_name: str, python: tuple[int, int] | None) -> None:
    assert shipped_python(os_name) == python


def test_an_os_older_than_the_agents_python_is_said_and_a_newer_or_unknown_one_is_not() -> None:
    assert too_old("Ubuntu Server 20.04 LTS 64bit") == (
        "Ubuntu Server 20.04 LTS 64bit ships Python 3.8; the agent needs 3.10 or later")
    assert too_old("Ubuntu Server 22.04 LTS 64bit") is None and too_old("something else") is None
