"""Groups (fan-out, fan-in) and chains.

``Scheduler.schedule_group(target, instances, then=callback)`` schedules the members and
the callback in the caller's transaction. The callback waits until every member has
finished (succeeded, abandoned, undecodable or cancelled: a member being retried has not
finished), then becomes due exactly once, however many processes finish members at the
same moment; its handler's ``ctx.group`` lists each member's outcome and result.
``schedule(target, instance, then=next)`` is a group of one: a chain, of any length when
``then`` is a list (each runs after the one before it has finished).

```python
group = scheduler.schedule_group(
    session,
    [render.instance(f"report-{c.id}", {"customer": c.id}) for c in customers],
    then=send_reports.instance(f"send-{batch_id}"),
)
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from sqla_scheduler._result import Result

__all__ = ["Group"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A group of executions and the callback that waits for them, as it stands.

    ``task_name`` and ``instance_id`` are the callback's (``None`` for a group scheduled
    without one). ``total`` counts the members scheduled (an instance whose key was taken
    already is not one), ``remaining`` those not finished yet. ``outcomes`` counts the
    finished ones by outcome; ``members`` (in a callback's ``ctx.group``) holds each
    finished member's result, in the order they finished.
    """

    id: int
    task_name: str | None
    instance_id: str | None
    total: int
    remaining: int
    created_at: datetime
    finished_at: datetime | None = None
    cancelled_at: datetime | None = None
    #: A link of a chain (``schedule(..., then=...)``, or a callback's own ``then``):
    #: its member cancelled before it ran cancels the callback and the links after it.
    chain: bool = False
    outcomes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    members: tuple[Result, ...] = ()

    @property
    def finished(self) -> bool:
        """Whether every member has finished."""
        return self.remaining <= 0

    @property
    def done(self) -> int:
        """How many members have finished."""
        return self.total - max(self.remaining, 0)
