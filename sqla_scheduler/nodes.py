"""Which schedulers are running: the nodes table.

Each running scheduler records itself in ``<table_name>_nodes`` (default
``scheduled_tasks_nodes``) when it starts and every ``node_heartbeat_interval`` (30 s by
default): its name, host, pid, start time, the time it was last seen, its concurrency,
how many handlers it runs and its sqla-scheduler version. It removes its row when it stops
cleanly; a process that was killed or lost the database leaves its row behind, and a
[`Node`][sqla_scheduler.nodes.Node] last seen more than three intervals ago is not alive.

``Scheduler.nodes(target)`` lists them.
"""

from __future__ import annotations

from sqla_scheduler._node import ALIVE_INTERVALS, Node

__all__ = ["ALIVE_INTERVALS", "Node"]
