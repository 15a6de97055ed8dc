"""What an operator's console reads and does on one scheduler's table: each page's rows
in one transaction with the header every page shows (``_reads``), and the actions on
executions, tasks, dead letters and groups, one at a time or in bulk (``_actions``).

The admin page is its client: it holds one ``Console`` and reaches no further towards
storage. Every call runs through ``_bridge.Database``, reads on the scheduler's
``read_engine`` (a replica's, when it has one) and writes on its ``engine``; the actions
that a face of ``Scheduler`` offers are done by that face. The values a client is handed
(``_values``, and ``Activity``, ``Point``, ``Listed`` and ``Finding`` from below) are
named here, so that it takes them from its door.
"""

from sqla_scheduler._bridge import Database
from sqla_scheduler._console._actions import Actions
from sqla_scheduler._console._reads import Reads
from sqla_scheduler._console._values import (
    MAX_BULK,
    SECTION_ROWS,
    SEEN_NAMES,
    AlreadyPaused,
    ExecutionFilter,
    GroupPage,
    Header,
    HistoryFilter,
    Overview,
    Page,
    Previewed,
    ResultFilter,
    Shown,
    page_count,
)
from sqla_scheduler._statements.finding import Finding
from sqla_scheduler._store.results import Listed
from sqla_scheduler._store.stats import Activity, Point
from sqla_scheduler.scheduler import Scheduler

__all__ = [
    "MAX_BULK",
    "SECTION_ROWS",
    "SEEN_NAMES",
    "Actions",
    "Activity",
    "AlreadyPaused",
    "Console",
    "ExecutionFilter",
    "Finding",
    "GroupPage",
    "Header",
    "HistoryFilter",
    "Listed",
    "Overview",
    "Page",
    "Point",
    "Previewed",
    "Reads",
    "ResultFilter",
    "Shown",
    "page_count",
]


class Console:
    """One scheduler's console: its ``reads`` and its ``actions``, over one ``Database``
    for writes and one for reads (the same unless a replica was given); values and errors
    are read only as far as ``preview`` characters, kept results' values as far as
    ``result_preview``."""

    def __init__(self, scheduler: Scheduler, *, preview: int, result_preview: int) -> None:
        db = Database(scheduler.engine)
        read_db = (
            db if scheduler.read_engine is scheduler.engine else Database(scheduler.read_engine)
        )
        self.reads = Reads(
            scheduler, db=db, read_db=read_db, preview=preview, result_preview=result_preview
        )
        self.actions = Actions(scheduler, db=db)
