from __future__ import annotations

import pytest

from orchestrator.providers.tencent.paging import PAGE, pages
from tests.unit.providers.tencent.fakes import PagedList


def numbered(count: int) -> list[dict[str, int]]:
    return [{"n": i} for i in range(count)]


def listing(fake: PagedList) -> list[int]:
    return [item["n"] for item in pages(fake, "cvm", "DescribeThings", {"Filters": ["f"]}, fake.items_key)]


def test_more_than_one_page_is_read_to_the_end() -> None:
    fake = PagedList(numbered(250), "ThingSet")
    assert listing(fake) == list(range(250))
    assert fake.offsets == [0, 100, 200]
    assert all(p["Limit"] == PAGE and p["Filters"] == ["f"] for _, _, p in fake.calls)
    assert {(s, a) for s, a, _ in fake.calls} == {("cvm", "DescribeThings")}


@pytest.mark.parametrize("count", [PAGE, 2 * PAGE])
def test_an_exact_multiple_of_the_page_asks_for_no_empty_page(count: int) -> None:
    fake = PagedList(numbered(count), "ThingSet")
    assert listing(fake) == list(range(count))
    assert fake.offsets == list(range(0, count, PAGE))


def test_an_empty_list_is_one_call() -> None:
    fake = PagedList([], "ThingSet")
    assert listing(fake) == []
    assert fake.offsets == [0]


def test_a_stated_total_shorter_than_the_pages_ends_the_listing() -> None:
    fake = PagedList(numbered(300), "ThingSet", total=150)
    assert listing(fake) == list(range(200))  # the page that reaches the total is kept whole
    assert fake.offsets == [0, 100]


def test_a_short_page_ends_the_listing_whatever_the_total_says() -> None:
    fake = PagedList(numbered(130), "ThingSet", total=1000)
    assert listing(fake) == list(range(130))
    assert fake.offsets == [0, 100]


def test_an_answer_without_a_total_ends_after_its_page() -> None:
    fake = PagedList(numbered(250), "ThingSet", total=None)
    assert listing(fake) == list(range(100))
    assert fake.offsets == [0]


def test_the_total_is_read_under_the_name_given() -> None:
    fake = PagedList(numbered(150), "RowSet", total_key="Total")
    rows = list(pages(fake, "billing", "DescribeRows", {}, "RowSet", "Total"))
    assert len(rows) == 150
    assert fake.offsets == [0, 100]
