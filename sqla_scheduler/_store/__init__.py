"""The one door to storage: the operations over ``_statements``, one module per concern.

Each operation is a sync function over a ``Connection`` in the caller's transaction:
sync callers run it directly, async callers through ``run_sync`` (see ``_bridge``), and
nothing here commits. The modules mirror ``_statements``: ``scheduling`` (the clients'
writes), ``listing`` (their reads), ``running`` (the runner's operations), and
``groups``, ``results``, ``history``, ``rates``, ``nodes``, ``control``, ``stats`` and
``bulk``; ``waiting`` waits for results. The operations callers use most are named here
too, so that ``_store.pick`` reads as the door it is.
"""

from sqla_scheduler._store import (
    bulk,
    completion,
    control,
    groups,
    history,
    listing,
    nodes,
    rates,
    results,
    running,
    scheduling,
    stats,
    waiting,
)
from sqla_scheduler._store._shared import PER_STATEMENT
from sqla_scheduler._store.completion import Completion
from sqla_scheduler._store.listing import (
    count_executions,
    counts_by_task,
    get_execution,
    list_executions,
    list_previews,
    recurring_executions,
    seen_task_names,
    state_counts,
    state_totals,
    task_counts,
)
from sqla_scheduler._store.running import (
    LimitedPick,
    TaskLimits,
    abandon,
    complete,
    delete_orphans,
    find_unreadable,
    heartbeat,
    mark_started,
    next_due,
    pick,
    pick_limited,
    remove,
    report_progress,
    revive,
    stop_requests,
)
from sqla_scheduler._store.scheduling import (
    Recurring,
    cancel,
    cancel_shown,
    check_sqlite_file,
    check_table,
    insert_instances,
    one_insert,
    register_recurring,
    reschedule,
)

__all__ = [
    "PER_STATEMENT",
    "Completion",
    "LimitedPick",
    "Recurring",
    "TaskLimits",
    "abandon",
    "bulk",
    "cancel",
    "cancel_shown",
    "check_sqlite_file",
    "check_table",
    "complete",
    "completion",
    "control",
    "count_executions",
    "counts_by_task",
    "delete_orphans",
    "find_unreadable",
    "get_execution",
    "groups",
    "heartbeat",
    "history",
    "insert_instances",
    "list_executions",
    "list_previews",
    "listing",
    "mark_started",
    "next_due",
    "nodes",
    "one_insert",
    "pick",
    "pick_limited",
    "rates",
    "recurring_executions",
    "register_recurring",
    "remove",
    "report_progress",
    "reschedule",
    "results",
    "revive",
    "running",
    "scheduling",
    "seen_task_names",
    "state_counts",
    "state_totals",
    "stats",
    "stop_requests",
    "task_counts",
    "waiting",
]
