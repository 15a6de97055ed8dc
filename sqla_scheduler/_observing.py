"""The scheduler's client methods for seeing what is scheduled, what happened and who
is running: ``get_execution``, ``executions``, ``history``, ``requeue``,
``prune_history`` and ``nodes``.

A facet of ``Scheduler``, which exposes these methods as its own (``_client`` says how
the facets are built). Like every client method, each takes the caller's session,
connection or engine, sync or async.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import datetime
from functools import partial
from typing import Any, overload

from sqlalchemy import Connection

from sqla_scheduler import _bridge, _store
from sqla_scheduler._bridge import AsyncTarget, SyncTarget, Target
from sqla_scheduler._checks import check_aware, check_filters, check_key, check_number
from sqla_scheduler._client import Client
from sqla_scheduler._execution import Execution, ExecutionState
from sqla_scheduler._history_entry import OUTCOMES, HistoryEntry, Outcome
from sqla_scheduler._node import Node, database_now
from sqla_scheduler._runner import Runner
from sqla_scheduler._statements import Statements, with_statements
from sqla_scheduler._statements.finding import HistoryFilter

__all__ = ["Observing"]


class Observing:
    """What is scheduled (``executions``), what happened (``history``, ``requeue``) and
    who runs (``nodes``).

    ``make_runner`` builds the services of one loop, whose history pruning
    ``prune_history`` runs once.
    """

    def __init__(self, client: Client, *, make_runner: Callable[[], Runner]) -> None:
        self._client = client
        self._make_runner = make_runner

    @overload
    def get_execution(
        self, target: SyncTarget, task_name: str, instance_id: str
    ) -> Execution | None: ...
    @overload
    def get_execution(
        self, target: AsyncTarget, task_name: str, instance_id: str
    ) -> Coroutine[Any, Any, Execution | None]: ...
    def get_execution(
        self, target: Target, task_name: str, instance_id: str
    ) -> Execution | Coroutine[Any, Any, Execution | None] | None:
        """The execution of ``task_name`` / ``instance_id``, or ``None``."""
        check_key(task_name, instance_id)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                partial(
                    _store.get_execution,
                    task_name=task_name,
                    instance_id=instance_id,
                ),
            ),
            one_statement=True,
        )

    @overload
    def executions(
        self,
        target: SyncTarget,
        state: ExecutionState = "all",
        *,
        task_name: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Execution]: ...
    @overload
    def executions(
        self,
        target: AsyncTarget,
        state: ExecutionState = "all",
        *,
        task_name: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> Coroutine[Any, Any, list[Execution]]: ...
    def executions(
        self,
        target: Target,
        state: ExecutionState = "all",
        *,
        task_name: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Execution] | Coroutine[Any, Any, list[Execution]]:
        """List executions in ``state``: ``all``, ``scheduled``, ``due``, ``running``,
        ``failing`` (latest failure first) or ``orphaned`` (unregistered task names)."""
        _check_listing(state, limit, offset)
        check_filters(task_name)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                partial(
                    _store.list_executions,
                    state=state,
                    task_name=task_name,
                    known_tasks=frozenset(self._client.tasks),
                    limit=limit,
                    offset=offset,
                    now=self._client.now(),
                ),
            ),
        )

    async def prune_history(self) -> int:
        """Delete history entries older than ``history_retention`` now (the loop does it
        every ``revive_interval``), in bounded batches; return how many went."""
        return await self._make_runner().prune_history_once()

    @overload
    def history(
        self,
        target: SyncTarget,
        *,
        task_name: str | None = None,
        instance_id: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[HistoryEntry]: ...
    @overload
    def history(
        self,
        target: AsyncTarget,
        *,
        task_name: str | None = None,
        instance_id: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> Coroutine[Any, Any, list[HistoryEntry]]: ...
    def history(
        self,
        target: Target,
        *,
        task_name: str | None = None,
        instance_id: str | None = None,
        outcome: Outcome | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[HistoryEntry] | Coroutine[Any, Any, list[HistoryEntry]]:
        """Finished attempts recorded in history, newest first: at most ``limit``, of
        ``task_name``, ``instance_id`` and ``outcome`` where given, finished at or after
        ``since``. What is recorded depends on the ``history`` setting."""
        if outcome is not None and outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r} (one of: {', '.join(OUTCOMES)})")
        check_filters(task_name, instance_id)
        check_number("limit", limit, 0)
        if since is not None:
            check_aware(since, "since")
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                partial(
                    _store.history.list_entries,
                    chosen=HistoryFilter(
                        task=task_name,
                        instance=instance_id,
                        outcomes=None if outcome is None else (outcome,),
                        since=since,
                    ),
                    limit=limit,
                ),
            ),
            one_statement=True,
        )

    @overload
    def requeue(self, target: SyncTarget, history_id: int) -> bool: ...
    @overload
    def requeue(self, target: AsyncTarget, history_id: int) -> Coroutine[Any, Any, bool]: ...
    def requeue(self, target: Target, history_id: int) -> bool | Coroutine[Any, Any, bool]:
        """Schedule the execution of an ``abandoned`` or ``undecodable`` history entry
        again, due now, with its payload as stored, in ``target``'s transaction.

        Returns ``False`` when the entry is not one of those (or does not exist), or an
        execution with its task name and instance id exists. The entry stays in history.
        """
        check_number("history_id", history_id, 1)
        return _bridge.call(
            target,
            self._client.table,
            with_statements(
                self._client.table,
                lambda conn, statements: _store.history.requeue(
                    conn,
                    statements,
                    history_id,
                    self._client.now(),
                    on_inserted=self._client.wake_on_commit(conn),
                ),
            ),
            writes=f"requeue(history entry {history_id})",
        )

    @overload
    def nodes(self, target: SyncTarget) -> list[Node]: ...
    @overload
    def nodes(self, target: AsyncTarget) -> Coroutine[Any, Any, list[Node]]: ...
    def nodes(self, target: Target) -> list[Node] | Coroutine[Any, Any, list[Node]]:
        """The schedulers running on this table, by name, as each last recorded itself.

        A node is alive when it was seen within three of its own
        ``node_heartbeat_interval``s (this scheduler's, for a row written before nodes
        recorded theirs) of the database's time (this scheduler's clock: a
        ``DatabaseClock`` is measured first if it is due). A scheduler that stopped cleanly
        is not listed; one that was killed stays listed, not alive (a scheduler started
        again under its name replaces its row).
        """

        def listed(conn: Connection, statements: Statements) -> list[Node]:
            return _store.nodes.list_nodes(
                conn,
                statements,
                now=database_now(conn, self._client.clock),
                interval=self._client.config.node_heartbeat_interval,
            )

        # reads only (the clock's measurement, then the listing): no transaction needed
        table = self._client.table
        return _bridge.call(target, table, with_statements(table, listed), one_statement=True)


def _check_listing(state: str, limit: int | None, offset: int) -> None:
    if state not in ("all", "scheduled", "due", "running", "failing", "orphaned"):
        raise ValueError(f"unknown execution state {state!r}")
    if limit is not None:
        check_number("limit", limit, 0)
    check_number("offset", offset, 0)
