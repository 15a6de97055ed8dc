"""The scheduler's share of its engine's connection pool.

A scheduler never waits for a connection while it holds one: a burst of outcomes (200
abandons at once, each a transaction of its own) must not take every connection of the
pool and then wait for one more, nor take every thread waiting for a connection that only
a thread can give back. So the scheduler's own services (picker, completer, heartbeats,
maintenance, abandons, ...) share a ``Budget`` of ``SERVICE_CONNECTIONS``: a unit of work
waits for its turn in the event loop, holding neither a thread nor a connection, and a
connection a service keeps between its units (a lane) is given back as soon as another
unit waits. A transactional handler's transaction is outside the budget: there are at most
``concurrency`` of them, and each needs no other connection.

``check_pool`` refuses at start a pool that cannot hold both, saying what to set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import anyio
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from sqla_scheduler.exceptions import ConfigurationError

__all__ = ["SERVICE_CONNECTIONS", "Budget", "capacity", "check_pool", "needed"]

#: The connections the scheduler's own services use at most at once (the "plus five" of
#: docs/production.md, "Sizing").
SERVICE_CONNECTIONS = 5


class Budget:
    """At most ``size`` connections out at once, handed out in the order they were asked
    for."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = anyio.Semaphore(size)

    @property
    def exhausted(self) -> bool:
        """Whether every connection of the budget is out."""
        return self._free.value == 0

    @property
    def awaited(self) -> bool:
        """Whether a unit of work waits for a connection."""
        return self._free.statistics().tasks_waiting > 0

    async def take(self) -> None:
        """Wait until a connection of the budget is free, and take it."""
        await self._free.acquire()

    def give_back(self) -> None:
        """Give a connection taken with ``take`` back."""
        self._free.release()


def capacity(engine: Engine | AsyncEngine) -> float:
    """How many connections ``engine``'s pool hands out at once: ``pool_size`` plus
    ``max_overflow`` for a queue pool, unbounded for the others (a ``NullPool`` opens one
    per checkout; a ``StaticPool`` or ``SingletonThreadPool`` shares one, never waiting)."""
    sync = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    pool = sync.pool
    if not isinstance(pool, QueuePool):  # AsyncAdaptedQueuePool is one too
        return math.inf
    # SQLAlchemy has no public accessor for the overflow bound; a negative one is unbounded
    overflow: int = getattr(pool, "_max_overflow", 0)
    return math.inf if overflow < 0 else pool.size() + overflow


def needed(concurrency: int, transactional: bool) -> int:
    """The connections a scheduler needs of its pool: its services', and one per running
    handler when a task is transactional (its transaction is a connection of its own)."""
    return SERVICE_CONNECTIONS + (concurrency if transactional else 0)


def check_pool(
    engine: Engine | AsyncEngine, *, concurrency: int, transactional: Mapping[str, Any]
) -> None:
    """Refuse ``engine`` when its pool cannot hold what the scheduler needs
    (``transactional``: the transactional tasks by name), saying what to set."""
    need = needed(concurrency, bool(transactional))
    has = capacity(engine)
    if has >= need:
        return
    sync = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    pool = sync.pool
    assert isinstance(pool, QueuePool)  # the others are unbounded
    why = f"{SERVICE_CONNECTIONS} for the scheduler's own services"
    if transactional:
        names = ", ".join(sorted(transactional)[:3]) + (", ..." if len(transactional) > 3 else "")
        why += f" and {concurrency} for concurrency={concurrency} transactional handlers ({names})"
    raise ConfigurationError(
        f"the engine's connection pool holds at most {int(has)} connection(s) "
        f"(pool_size={pool.size()}, max_overflow={getattr(pool, '_max_overflow', 0)}); "
        f"the scheduler needs {need}: {why}. Create the engine with "
        f"pool_size={need} or more (create_engine(url, pool_size={need})), plus what the "
        "handlers open themselves, or lower concurrency"
    )
