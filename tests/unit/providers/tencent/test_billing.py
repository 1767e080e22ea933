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


def test_the_balance_is_read_in_cny_and_a_credit_limit_counts_where_it_is_answered() -> None:
    class Answering:
        def __init__(self, answer: dict[str, Any]) -> None:
            self.answer = answer

        def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
            assert (service, action, params) == ("billing", "DescribeAccountBalance", {})
            return self.answer

    answer = {"Balance": -500, "RealBalance": -500.0, "FreezeAmount": 869.0, "OweAmount": 0.0,
              "RealCreditBalance": 99500.0}
    credited = billing.account_balance(Answering(answer))  # type: ignore[arg-type]
    assert (credited.real, credited.frozen, credited.available) == (-5.0, 8.69, 995.0)
    older = billing.account_balance(Answering({"Balance": 12345}))  # type: ignore[arg-type]
    assert (older.real, older.real_credit, older.available) == (123.45, None, 123.45)
