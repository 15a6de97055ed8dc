"""Every SQL statement the library runs, built with SQLAlchemy Core; no I/O here.

Statements are built once per table and database and cached, in nine parts: what the
application and admin page write (``Scheduling``), what a runner runs (``Running``), what
is read to show (``Listing``), the history table's (``History``), the nodes table's
(``Nodes``), the kept results' (``Results``), the groups' (``Groups``), the rate
limits' (``Rates``) and the per-minute counts' (``Stats``). "Now" is always a bound
parameter, so tests can pin time and production binds the scheduler's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

from sqlalchemy import Connection, Table

from sqla_scheduler._dialects import Backend, backend_for
from sqla_scheduler._statements.groups import Groups
from sqla_scheduler._statements.history import History
from sqla_scheduler._statements.listing import Listing
from sqla_scheduler._statements.nodes import Nodes
from sqla_scheduler._statements.rates import Rates
from sqla_scheduler._statements.results import Results
from sqla_scheduler._statements.running import Running
from sqla_scheduler._statements.scheduling import Scheduling
from sqla_scheduler._statements.stats import Stats

__all__ = [
    "Groups",
    "History",
    "Listing",
    "Nodes",
    "Rates",
    "Results",
    "Running",
    "Scheduling",
    "Statements",
    "Stats",
    "statements_for",
    "statements_on",
    "with_statements",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Statements:
    """The statements for one scheduler table on one kind of database, with the table and
    the database's ``Backend`` they were built for: what the stores are handed."""

    table: Table
    backend: Backend
    scheduling: Scheduling
    running: Running
    listing: Listing
    history: History
    nodes: Nodes
    results: Results
    groups: Groups
    rates: Rates
    stats: Stats


@cache
def statements_for(table: Table, backend: Backend) -> Statements:
    """The cached ``Statements`` for ``table`` on ``backend``."""
    return Statements(
        table=table,
        backend=backend,
        scheduling=Scheduling(table, backend),
        running=Running(table, backend),
        listing=Listing(table, backend),
        history=History(table, backend),
        nodes=Nodes(table, backend),
        results=Results(table, backend),
        groups=Groups(table, backend),
        rates=Rates(table, backend),
        stats=Stats(table, backend),
    )


def statements_on(conn: Connection, table: Table) -> Statements:
    """The ``Statements`` for ``table`` on the database ``conn`` talks to: how a caller
    handed its connection per call (a scheduler's method, a command, the admin page) finds
    what to hand the stores; a runner's services find theirs once (``Service``)."""
    return statements_for(table, backend_for(conn.dialect))


def with_statements(
    table: Table, operation: Callable[[Connection, Statements], T]
) -> Callable[[Connection], T]:
    """``operation`` (a store's, its other arguments bound) as a unit of work: run on a
    connection, it is handed the ``Statements`` for ``table`` there (``statements_on``)."""
    return lambda conn: operation(conn, statements_on(conn, table))
