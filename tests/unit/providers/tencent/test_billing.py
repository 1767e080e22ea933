from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from orchestrator.providers.tencent import billing, errors
from tests.unit.providers.tencent.fakes import PagedList

JUNE = datetime(2025, 6, 30, 23, 0, tzinfo=timezone.utc)


def test_the_cost_sums_every_row_of_every_page() -> None:
    rows = [{"ResourceId": "ins-1", "RealTotalCost": "0.25"} for _ in range(150)]
    fake = PagedList(rows, "ResourceSummarySet", total_key="Total")
    assert billing.resource_cost(fake, "ins-1", JUNE) == 37.5  # type: ignore[arg-type]
    assert fake.offsets == [0, 100]
    _, action, params = fake.calls[0]
    assert action == "DescribeBillResourceSummary"
    assert (params["Month"], params["ResourceId"], params["NeedRecordNum"]) == ("2025-06", "ins-1", 1)


def test_a_resource_the_bill_does_not_list_yet_costs_none() -> None:
    assert billing.resource_cost(PagedList([], "ResourceSummarySet", "Total"), "ins-1", JUNE) is None  # type: ignore[arg-type]


def test_a_month_the_bill_refuses_costs_none() -> None:
    class Refusing:
        def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
            raise errors.InvalidRequestError("InvalidParameterValue", "Month")

    assert billing.resource_cost(Refusing(), "ins-1", JUNE) is None  # type: ignore[arg-type]
