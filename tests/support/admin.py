"""What the admin page's tests share: a scheduler with one task of each kind, rows of
every state to seed its tables with (some with hostile text), and an HTTP client on the
ASGI app."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp

from sqla_scheduler import ManualClock, Scheduler, custom, one_time, recurring
from sqla_scheduler.admin._security import csrf_token
from sqla_scheduler.models import history_table, nodes_table, results_table, table_for
from tests.support import NOW

USER, PASSWORD = "ops", "correct horse battery staple"
#: The sync cases of the ``db`` harness: the SQL of a filter, an order or a bulk action
#: differs by database (ILIKE or LIKE, NULLs first or last), how it is run does not.
EVERY_DATABASE = pytest.mark.parametrize(
    "db",
    [
        pytest.param(("sync", "postgresql"), id="sync-postgresql"),
        pytest.param(("sync", "sqlite"), id="sync-sqlite"),
        pytest.param(("sync", "mariadb"), id="sync-mariadb"),
    ],
    indirect=True,
)
#: One database, for what does not depend on it (rendering, parameters, escaping).
ONE_DATABASE = pytest.mark.parametrize(
    "db", [pytest.param(("sync", "postgresql"), id="sync-postgresql")], indirect=True
)
#: Text that runs script if a page ever puts it into HTML unescaped.
XSS = "<img src=x onerror=alert(1)>"
#: The last error of the failing ``bounce-3``.
BOUNCE_ERROR = (
    "OSError: mailbox unavailable\nTraceback (most recent call last):\n"
    '  File "mail.py", line 3, in send\n    raise OSError("mailbox unavailable")'
)
XSS_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"
#: An orphaned task name that would run script too.
XSS_TASK = "<svg onload=alert(3)>"
#: The error of the abandoned ``send-email`` entry of the hostile instance.
ABANDONED_ERROR = (
    "ValueError: </pre><script>alert(6)</script>\nTraceback (most recent call last):\n"
    '  File "mail.py", line 9, in send\n    raise ValueError(html)'
)
#: Its payload, kept in history.
ABANDONED_DATA = {"html": XSS, "note": "</pre><script>alert(7)</script>", "n": 3}
#: What the handler of the hostile result returned, kept as its value.
HOSTILE_VALUE = {"html": XSS, "note": "</code><script>alert(8)</script>"}
#: What the running ``poll-feed``'s handler last reported: a fraction and a message.
POLL_PROGRESS = (0.42, "fetched 42 of 100 feeds")
#: What the running ``welcome-2``'s handler last reported: a message alone.
WELCOME_PROGRESS = "waiting for the mail server to answer"
#: The error kept with the result of the hostile instance.
HOSTILE_RESULT_ERROR = (
    "PayloadError: </code><script>alert(9)</script>\nTraceback (most recent call last):"
)


@recurring("nightly-report", "CRON|0 0 2 * * ?")
def nightly_report(ctx: Any) -> None:
    pass


@recurring("poll-feed", "FIXED_RATE|5m")
def poll_feed(ctx: Any) -> None:
    pass


@recurring("cleanup", "DAILY|03:30|Europe/Berlin")
def cleanup(ctx: Any) -> None:
    pass


@one_time("send-email", max_retries=5)
def send_email(ctx: Any) -> None:
    pass


@custom("sync-account", priority=5)
def sync_account(ctx: Any) -> None:
    pass


TASKS = [nightly_report, poll_feed, cleanup, send_email, sync_account]


def make_scheduler(engine: Engine | AsyncEngine, now: datetime = NOW) -> Scheduler:
    """A scheduler of :data:`TASKS` whose clock stands at ``now``."""
    return Scheduler(engine, tasks=TASKS, clock=ManualClock(now))


def row(task: str, instance: str, at: datetime, **values: Any) -> dict[str, Any]:
    return {
        "task_name": task,
        "task_instance": instance,
        "task_data": values.pop("data", None),
        "execution_time": at,
        "picked": False,
        "picked_by": None,
        "last_heartbeat": None,
        "last_success": None,
        "last_failure": None,
        "consecutive_failures": 0,
        "priority": 0,
        "schedule": None,
        "last_error": None,
        "progress": None,
        "progress_message": None,
        "progress_at": None,
        **values,
    }


def seed(engine: Engine, now: datetime = NOW) -> None:
    """Executions in every state the page shows, relative to ``now``.

    ``cleanup`` (recurring) gets no row, as before a scheduler registers it. Running:
    ``poll-feed`` (fresh heartbeat, ``POLL_PROGRESS`` reported 2 s ago), ``welcome-2``
    (late, ``WELCOME_PROGRESS`` reported 13 min ago), ``invoice-7`` (dead, no report). Failing,
    latest failure first: the hostile instance, ``bounce-3``, ``bounce-4``. Orphaned:
    ``legacy-import`` and a task whose name is hostile markup.
    """
    m, h, d = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)
    rows = [
        row(
            "nightly-report",
            "recurring",
            (now + d).replace(hour=2, minute=0, second=0, microsecond=0),
            schedule="CRON|0 0 2 * * ?",
            last_success=(now).replace(hour=2, minute=0, second=4, microsecond=0),
        ),
        row(
            "poll-feed",
            "recurring",
            now - 20 * m,
            schedule="FIXED_RATE|5m",
            picked=True,
            picked_by="worker-2",
            last_heartbeat=now - timedelta(seconds=20),
            last_success=now - 25 * m,
            last_failure=now - 3 * h,
            progress=POLL_PROGRESS[0],
            progress_message=POLL_PROGRESS[1],
            progress_at=now - timedelta(seconds=2),
        ),
        row("send-email", "welcome-1", now + 10 * m, data={"to": "ada@example.com"}),
        row(
            "send-email",
            "welcome-2",
            now - 15 * m,
            data={"to": "grace@example.com"},
            picked=True,
            picked_by="worker-1",
            last_heartbeat=now - 12 * m,
            progress_message=WELCOME_PROGRESS,
            progress_at=now - 13 * m,
        ),
        row(
            "send-email",
            "invoice-7",
            now - 2 * h,
            data={"invoice": 7},
            picked=True,
            picked_by="worker-3",
            last_heartbeat=now - 45 * m,
        ),
        row(
            "send-email",
            XSS,
            now + 4 * m,
            data={"html": XSS, "note": "</pre><script>alert(2)</script>"},
            consecutive_failures=2,
            last_failure=now - 2 * m,
            last_error="ValueError: </pre><script>alert(5)</script>",
        ),
        row(
            "send-email",
            "bounce-3",
            now + 10 * m,
            data={"to": "nobody@example.invalid"},
            consecutive_failures=3,
            last_failure=now - 5 * m,
            last_error=BOUNCE_ERROR,
        ),
        row(
            "send-email",
            "bounce-4",
            now + 30 * m,
            consecutive_failures=1,
            last_failure=now - h,
            last_success=now - d,
        ),
        row("sync-account", "acct-42", now + h, data={"account": 42}, priority=5),
        row("legacy-import", "batch-2019", now - 2 * d, data={"file": "2019.csv"}),
        row(XSS_TASK, "x", now - d, data=None),
    ]
    with engine.begin() as conn:
        conn.execute(insert(table_for()), rows)


def entry_row(
    task: str, instance: str, outcome: str, finished: datetime, **values: Any
) -> dict[str, Any]:
    """A history entry's row; its payload (``data``) as the JSON text history keeps."""
    data = values.pop("data", None)
    return {
        "task_name": task,
        "task_instance": instance,
        "outcome": outcome,
        "execution_time": finished - timedelta(seconds=1),
        "started_at": finished - timedelta(milliseconds=250),
        "finished_at": finished,
        "picked_by": "worker-1",
        "attempt": 1,
        "error": None,
        "task_data": None if data is None else json.dumps(data),
        "priority": 0,
        **values,
    }


def seed_history(engine: Engine, now: datetime = NOW) -> None:
    """History entries, oldest first (so that ids follow time), relative to ``now``.

    A success of ``nightly-report`` 20 days ago, before the 14 days of
    ``history_retention``. Within them: an orphaned task's abandoned entry (3 days ago);
    ``send-email`` succeeded once (``welcome-1``), failed twice (``bounce-3``, attempts 1
    and 2) and was abandoned once (the hostile instance, with its payload);
    ``sync-account`` had an undecodable payload; ``nightly-report`` died once (its
    scheduler stopped). Three dead letters in all.
    """
    m, h, d = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)
    entries = [
        entry_row("nightly-report", "recurring", "succeeded", now - 20 * d),
        entry_row(
            "legacy-import",
            "batch-2018",
            "abandoned",
            now - 3 * d,
            data={"file": "2018.csv"},
            error="OSError: no such file",
        ),
        entry_row("send-email", "welcome-1", "succeeded", now - 3 * h),
        entry_row("send-email", "bounce-3", "failed", now - 2 * h, error=BOUNCE_ERROR),
        entry_row(
            "send-email",
            "bounce-3",
            "failed",
            now - 90 * m,
            error=BOUNCE_ERROR,
            attempt=2,
            picked_by="worker-2",
            started_at=now - 90 * m - timedelta(seconds=12.5),
        ),
        entry_row(
            "send-email",
            XSS,
            "abandoned",
            now - h,
            data=ABANDONED_DATA,
            error=ABANDONED_ERROR,
            attempt=3,
        ),
        entry_row(
            "sync-account",
            "acct-9",
            "undecodable",
            now - 45 * m,
            started_at=None,
            data={"account": "nine"},
            error="PayloadError: account must be an int",
            priority=5,
        ),
        entry_row(
            "nightly-report",
            "recurring",
            "dead",
            now - 30 * m,
            picked_by="worker-3",
            started_at=now - 2 * h,
            error="DeadExecution: worker-3 stopped heartbeating",
        ),
    ]
    with engine.begin() as conn:
        conn.execute(insert(history_table(table_for())), entries)


def result_row(
    task: str, instance: str, outcome: str, finished: datetime, **values: Any
) -> dict[str, Any]:
    """A kept result's row; its value as the JSON text the results table keeps."""
    value = values.pop("value", None)
    return {
        "task_name": task,
        "task_instance": instance,
        "outcome": outcome,
        "value": None if outcome != "succeeded" else json.dumps(value),
        "error": None,
        "finished_at": finished,
        **values,
    }


def seed_results(engine: Engine, now: datetime = NOW) -> None:
    """Kept results, oldest first (so that ids follow time), relative to ``now``: two
    successes of ``render-report`` (``r-2``'s value hostile markup), an abandoned
    ``charge`` with its error, an undecodable payload of the hostile instance (its error
    hostile too) and a cancelled ``charge``."""
    m, h = timedelta(minutes=1), timedelta(hours=1)
    rows = [
        result_row("render-report", "r-1", "succeeded", now - 3 * h, value={"url": "/r/1"}),
        result_row(
            "charge",
            "c-1",
            "abandoned",
            now - 2 * h,
            error="ValueError: card declined\nTraceback (most recent call last):\n  ...",
        ),
        result_row("render-report", "r-2", "succeeded", now - h, value=HOSTILE_VALUE),
        result_row("render-report", XSS, "undecodable", now - 30 * m, error=HOSTILE_RESULT_ERROR),
        result_row("charge", "c-2", "cancelled", now - 10 * m),
    ]
    with engine.begin() as conn:
        conn.execute(insert(results_table(table_for())), rows)


def node_row(name: str, last_seen: datetime, **values: Any) -> dict[str, Any]:
    """A nodes table row of a scheduler called ``name``, last seen at ``last_seen``."""
    return {
        "name": name,
        "host": "app-" + name.rsplit("-", 1)[-1],
        "pid": 4100,
        "started_at": last_seen - timedelta(days=2, hours=3),
        "last_seen": last_seen,
        "concurrency": 10,
        "running": 0,
        "version": "0.9.0",
        **values,
    }


def seed_nodes(engine: Engine, now: datetime = NOW) -> None:
    """The scheduler nodes of :func:`seed`'s pickers, relative to ``now`` (and the default
    ``node_heartbeat_interval`` of 30 s): ``worker-1`` and ``worker-2`` alive, ``worker-3``
    stale (last seen 45 minutes ago, as its dead execution's heartbeat says)."""
    rows = [
        node_row("worker-1", now - timedelta(seconds=12), pid=2817, running=1),
        node_row("worker-2", now - timedelta(seconds=3), pid=3090, running=1, concurrency=4),
        node_row("worker-3", now - timedelta(minutes=45), pid=1174, running=1, version="0.8.2"),
    ]
    with engine.begin() as conn:
        conn.execute(insert(nodes_table(table_for())), rows)


def seed_many(engine: Engine, count: int, now: datetime = NOW) -> None:
    """``count`` one-time executions in one statement: every 10th running, every 7th
    failing, spread over ``send-email`` and ``sync-account``, one a second from ``now``."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                insert into scheduled_tasks (
                    task_name, task_instance, task_data, execution_time, picked, picked_by,
                    last_heartbeat, consecutive_failures, last_failure)
                select
                    case when g % 2 = 0 then 'send-email' else 'sync-account' end,
                    'bulk-' || lpad(g::text, 6, '0'),
                    jsonb_build_object('n', g),
                    :now + make_interval(secs => g),
                    g % 10 = 0,
                    case when g % 10 = 0 then 'worker-' || (g % 3) end,
                    case when g % 10 = 0 then :now end,
                    case when g % 7 = 0 then 1 + g % 4 else 0 end,
                    case when g % 7 = 0 then :now - make_interval(secs => g) end
                from generate_series(1, :count) as g
                """
            ),
            {"now": now, "count": count},
        )
        conn.execute(text("analyze scheduled_tasks"))


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def start_tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of ``html``, as a browser's tokenizer sees it, with its attributes."""
    parser = _TagCollector()
    parser.feed(html)
    parser.close()
    return parser.tags


def foreign_tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """The start tags of ``html`` other than the page's one script of its own (the time
    zone toggle, ``<script src=".../static/admin.js" defer>``, which the policy allows):
    what a test of escaping must find none of."""
    return [
        (tag, attrs)
        for tag, attrs in start_tags(html)
        if not (
            tag == "script"
            and len(attrs) == 2
            and dict(attrs).get("src", "").endswith("/static/admin.js")  # type: ignore[union-attr]
            and "defer" in dict(attrs)
        )
    ]


def assert_inert(html: str, label: object = None) -> None:
    """Assert that ``html`` carries no markup from the data it shows: no script, style,
    image, svg or frame tag but the page's own script, no ``style`` or event-handler
    attribute, and no link or form that leaves the admin (``/admin/jobs/``); ``label``
    names the page in a failure."""
    tags = foreign_tags(html)
    assert {"script", "style", "img", "svg", "iframe"}.isdisjoint(t for t, _ in tags), label
    attributes = {name for _, attrs in tags for name, _ in attrs}
    assert "style" not in attributes, label
    assert not any(name.startswith("on") for name in attributes), (label, attributes)
    links = re.findall(r'\s(?:href|action)="([^"]+)"', html)
    assert [link for link in links if not link.startswith("/admin/jobs/")] == [], label


async def answered(client: httpx.AsyncClient, path: str) -> httpx.Response:
    """``client``'s GET of ``path``, asserted to have answered 200 (the failure shows the
    path and the start of the answer)."""
    response = await client.get(path)
    assert response.status_code == 200, (path, response.text[:200])
    return response


def client_for(
    app: ASGIApp, *, auth: tuple[str, str] | None = (USER, PASSWORD)
) -> httpx.AsyncClient:
    """An HTTP client that talks to ``app`` in process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://admin.test",
        auth=auth,
        follow_redirects=False,
    )


AppFactory = Callable[..., ASGIApp]


#: The secret of the apps with actions, and the CSRF token it gives ``USER``.
SECRET = b"0123456789abcdef0123456789abcdef"
TOKEN = csrf_token(SECRET, USER)
