"""Calling the application's code: whatever it raises is a failure, never the end.

Handlers, interceptors, upcasters, ``payload_type`` validation and serialization,
``on_abandon`` hooks, listeners and custom schedules are the application's code. Whatever
they raise, ``BaseException`` subclasses such as ``SystemExit``, ``KeyboardInterrupt`` and
``GeneratorExit`` included, is a failure of what they were called for (that execution,
that hook); only the scheduler's own cancellation (a stop) passes through.

Every call of application code goes through one of three doors:

* ``calling(task, hook)`` around sync code: a ``BaseException`` that is not an
  ``Exception`` leaves it as an ``ApplicationError`` (an ``Exception``, the original as its
  ``__cause__``), so the caller's ``except Exception`` handles it like any error;
* ``guard(task, hook, fn)``: ``fn`` wrapped the same way, awaitable results included
  (for code the scheduler runs in a thread or awaits: ``on_abandon``);
* ``failure(error)``: what a handler's run inside the interceptors raised, whatever that
  is, as the execution's failure (recorded as raised).

Sync code cannot receive the scheduler's cancellation (it arrives at an ``await``), so what
it raises is always its own; awaited code is checked with ``raise_if_cancelled``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import sniffio

__all__ = ["ApplicationError", "calling", "failure", "guard", "raise_if_cancelled", "summary"]

T = TypeVar("T")


class ApplicationError(Exception):
    """Application code raised a ``BaseException`` that is not an ``Exception``; the
    original is ``__cause__``. The message names the task and the hook."""

    def __init__(
        self, task_name: str | None, hook: str, error: BaseException, owner: object = None
    ) -> None:
        self.task_name = task_name
        self.hook = hook
        self.error = error
        where = hook if owner is None else f"{hook} of {owner!r}"
        if task_name is not None:
            where = f"task {task_name!r}: {where}"
        super().__init__(f"{where} raised {summary(error)}")


def summary(error: BaseException) -> str:
    """``Type: message`` of what application code raised (the original, for an
    ``ApplicationError``), for messages that name the hook themselves."""
    if isinstance(error, ApplicationError):
        error = error.error
    detail = str(error)
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


class calling:  # lower case: used as a function, ``with calling(task, hook):``
    """Run the block (sync application code: ``hook`` of task ``task_name``, ``None`` for
    none; of ``owner``, a listener say, when given) and turn a ``BaseException`` it raises
    that is not an ``Exception`` into an ``ApplicationError``; ``Exception`` subclasses
    pass as they are. A class, not a generator: it is on the path of every execution."""

    __slots__ = ("hook", "owner", "task_name")

    def __init__(self, task_name: str | None, hook: str, owner: object = None) -> None:
        self.task_name = task_name
        self.hook = hook
        self.owner = owner

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None and not isinstance(error, Exception):
            # SystemExit, KeyboardInterrupt, GeneratorExit, the application's own
            raise ApplicationError(self.task_name, self.hook, error, self.owner) from error


def guard(task_name: str | None, hook: str, fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` (application code: ``hook`` of task ``task_name``), raising an
    ``ApplicationError`` where it would raise a ``BaseException`` that is not an
    ``Exception``; an awaitable it returns is awaited under the same rule, the scheduler's
    own cancellation excepted."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        with calling(task_name, hook):
            result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            return _awaited(task_name, hook, result)
        return result

    return guarded


async def _awaited(task_name: str | None, hook: str, awaitable: Awaitable[T]) -> T:
    try:
        return await awaitable
    except Exception:
        raise
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            await raise_if_cancelled()  # a stop: passes; else the code's own
        raise ApplicationError(task_name, hook, exc) from exc


async def failure(error: BaseException) -> BaseException:
    """What a handler's run raised, ``error``, as its failure, whatever it is; the
    scheduler's own cancellation (a stop) is raised instead. Called from the ``except
    BaseException`` around the run, so the common path (no error) costs nothing more."""
    if isinstance(error, anyio.get_cancelled_exc_class()):
        # the loop is stopping (re-raised here: the execution is released, not failed), or
        # the code raised the class itself: its own timeout, a future it awaited
        await raise_if_cancelled()
    return error


async def raise_if_cancelled() -> None:
    """Raise the cancellation of the running task, if it is being cancelled: by a cancel
    scope, which cancels it again at every checkpoint, or on asyncio by ``Task.cancel``
    (Python 3.11 and later count those requests). Return when it is not."""
    await anyio.lowlevel.checkpoint_if_cancelled()
    if sniffio.current_async_library() == "asyncio":
        import asyncio

        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        if cancelling is not None and cancelling() > 0:
            raise asyncio.CancelledError
