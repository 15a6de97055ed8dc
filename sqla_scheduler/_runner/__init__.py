"""The execution loop, as small services that share only the held set and the waker.

- ``held``: the executions this process holds, and the counts that size a pick;
- ``waker``: the wake-up the picker waits on, and the LISTEN service that wakes it;
- ``outcomes``: the pure policy from a handler's result or error to what is recorded;
- ``picker``, ``executor``, ``completer``, ``heartbeater``, ``maintenance``, ``nodes``: one
  service each, each with a ``run_once`` that tests call directly;
- ``workers``: the queue and the workers, the one place outcomes go to the completer;
- ``loop``: the ``Runner`` that builds them and runs them in one task group;
- ``lifecycle``: how a scheduler runs its ``Runner`` (task group, context, thread).

Only ``scheduler`` imports this package; nothing here imports ``scheduler``.
"""

from sqla_scheduler._runner.lifecycle import Lifecycle
from sqla_scheduler._runner.loop import Runner

__all__ = ["Lifecycle", "Runner"]
