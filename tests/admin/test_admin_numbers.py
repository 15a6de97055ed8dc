"""The admin page's ids, pages and parameters: every number is a whole number in ASCII
digits that a bigint holds, and the JSON API names a parameter it does not take instead
of ignoring it (issue 29, defects 5 and 11). Up to the bounds, requests are answered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine

from sqla_scheduler import ConfigurationError, Scheduler
from sqla_scheduler.admin import create_app
from tests.support.admin import PASSWORD, USER

pytestmark = pytest.mark.anyio

BIG = 2**63
PAGES = (2**63 - 1) // 500  # the last page whose first row is at an offset a bigint holds

#: (path, status, what the answer says)
CASES = [
    ("/api/history?since=garbage", 400, "since must be an ISO 8601 date and time"),
    ("/api/history?since=1h", 400, "got '1h'"),
    ("/api/executions?before=2030-01-01", 400, "unknown parameter 'before'"),
    ("/api/dead-letters?limit=5", 400, "unknown parameter 'limit'"),
    ("/api/execution?task=a&instance=b&x=1", 400, "unknown parameter 'x'"),
    ("/api/history/entry?id=1&page=2", 400, "unknown parameter 'page'"),
    ("/api/summary?refresh=5", 400, "unknown parameter 'refresh'"),
    ("/api/history/entry?id=\u0661\u0662", 400, "id must be a positive whole number"),
    ("/history/entry?id=\uff15", 400, "id must be a positive whole number"),
    ("/api/executions?per_page=\uff15", 400, "per_page must be a positive whole number"),
    ("/api/history/entry?id=" + str(BIG), 400, f"of at most {BIG - 1}, got '{BIG}'"),
    ("/api/history/entry?id=" + "9" * 5000, 400, "id must be a positive whole number"),
    ("/api/history?page=" + str(PAGES + 1), 400, f"of at most {PAGES}, got '{PAGES + 1}'"),
    ("/api/executions?page=" + str(2**70), 400, "page must be a positive whole number"),
    # the bounds themselves: answered, not a database error
    ("/api/history/entry?id=" + str(BIG - 1), 404, "no history entry"),
    ("/api/history/entry?id=" + "0" * 30 + "7", 404, "no history entry 7 "),
    ("/api/history?page=" + str(PAGES), 200, '"entries":[]'),
    ("/api/executions?page=" + str(PAGES) + "&per_page=500", 200, '"executions":[]'),
    ("/history?page=" + str(PAGES) + "&refresh=5", 200, "<html"),
    # a group's id is in the path, checked the same way
    (
        "/api/groups/" + str(BIG),
        400,
        f"group id must be a positive whole number of at most {BIG - 1}",
    ),
    ("/groups/\uff15", 400, "group id must be a positive whole number"),
    ("/api/groups/" + str(BIG - 1), 404, f"There is no group {BIG - 1}."),
    ("/api/groups?page=" + str(PAGES) + "&per_page=500", 200, '"groups":[]'),
    ("/api/groups?instance=x", 400, "unknown parameter 'instance'"),
]


async def test_numbers_and_unknown_parameters(client: httpx.AsyncClient) -> None:
    for path, status, says in CASES:
        response = await client.get(path)
        assert response.status_code == status, (path, response.text)
        assert says in response.text, (path, response.text)


@pytest.mark.parametrize("page_size", [0, 501, True, "50", 50.0])
def test_a_page_size_out_of_range_is_refused(page_size: Any) -> None:
    scheduler = Scheduler(create_engine("sqlite://"))
    with pytest.raises(ConfigurationError, match=f"page_size must be 1 to 500, got {page_size!r}"):
        create_app(scheduler, username=USER, password=PASSWORD, page_size=page_size)
