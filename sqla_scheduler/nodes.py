"""Which schedulers are running: the nodes table.

Each running scheduler records itself in ``<table_name>_nodes`` (default
``scheduled_tasks_nodes``) when it starts and every ``node_heartbeat_interval`` (30 s by
default): its name, host, pid, start time, the time it was last seen, its concurrency,
how many handlers it runs, its sqla-scheduler version and that interval. It removes its
row when it stops cleanly; a process that was killed or lost the database leaves its row
behind, and a [`Node`][sqla_scheduler.nodes.Node] last seen more than three of its own
intervals ago, by the database's clock, is stale (not alive), whatever the reader's own
configuration.

[`Scheduler.nodes`][sqla_scheduler.Scheduler.nodes] lists them from the application;
[`list_nodes`][] from outside it, given a database URL: it is what ``sqla-scheduler nodes``
prints.

```python
from sqla_scheduler.nodes import list_nodes

for node in list_nodes("sqlite:///app.db"):
    print(node.name, node.host, node.pid, "alive" if node.alive else "not alive")
```
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from sqla_scheduler._dialects import borrowed_engine
from sqla_scheduler._node import ALIVE_INTERVALS, Node

__all__ = ["ALIVE_INTERVALS", "Node", "list_nodes"]


def list_nodes(
    url: str | URL | Engine,
    *,
    table_name: str = "scheduled_tasks",
    schema: str | None = None,
    node_heartbeat_interval: timedelta = timedelta(seconds=30),
) -> list[Node]:
    """List the nodes recorded beside the table ``table_name`` (in ``schema``) at ``url``.

    ``url`` is a database URL or a sync engine. Whether a node is alive is judged against
    the database's clock on PostgreSQL (the clock schedulers there write by) and this
    machine's on SQLite, by the node's own ``node_heartbeat_interval`` as it recorded it;
    ``node_heartbeat_interval`` (the config's default, 30 s, unless given) judges a row
    written by a version that did not record it.

    The nodes table is looked up first: [`MissingTableError`][] when it is not there (the
    schema is behind, or was never created; nor, for a SQLite file that does not exist, is
    the file created). Database failures raise SQLAlchemy's own errors.
    """
    from sqla_scheduler import _store
    from sqla_scheduler._node import database_now
    from sqla_scheduler._statements import statements_on
    from sqla_scheduler.models import nodes_table, table_for

    if node_heartbeat_interval <= timedelta(0):
        raise ValueError(
            f"node_heartbeat_interval must be more than zero, got {node_heartbeat_interval!r}"
        )
    table = table_for(table_name, schema)
    with borrowed_engine(url) as engine:
        _store.check_sqlite_file(engine.url, nodes_table(table))
        with engine.connect() as conn:
            _store.check_table(conn, nodes_table(table))
            return _store.nodes.list_nodes(
                conn,
                statements_on(conn, table),
                now=database_now(conn),
                interval=node_heartbeat_interval,
            )
