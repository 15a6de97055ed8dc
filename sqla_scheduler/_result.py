"""A finished execution's kept result, and how it is encoded to keep (``results`` is the
public face: see it).

The runner and the stores import this module, not ``results``, which imports the client
side (``executions``) for ``read_result`` and ``wait_for_result``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sqla_scheduler._limits import DEFAULT_MAX_RESULT_SIZE
from sqla_scheduler._payload import normalize_json
from sqla_scheduler._types import dumps_payload
from sqla_scheduler.exceptions import PayloadError

if TYPE_CHECKING:
    from sqla_scheduler._execution import Execution

__all__ = [
    "DEFAULT_MAX_RESULT_SIZE",
    "RESULT_OUTCOMES",
    "RESULT_SORTS",
    "Kept",
    "Result",
    "ResultOutcome",
    "decode_result",
    "encode_result",
    "kept",
]


ResultOutcome = Literal["succeeded", "abandoned", "undecodable", "cancelled"]
RESULT_OUTCOMES: tuple[ResultOutcome, ...] = ("succeeded", "abandoned", "undecodable", "cancelled")
"""How an execution can finish, as ``Result.outcome`` spells it."""

#: The sort keys of a results listing: the columns each orders by (then by id).
RESULT_SORTS: dict[str, tuple[str, ...]] = {
    "finished": ("finished_at",),
    "task": ("task_name",),
    "instance": ("task_instance",),
    "outcome": ("outcome",),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """The final outcome of one execution of a task with ``keep_result``, or of a group's
    member.

    ``value`` is what the handler returned, as JSON gives it back (a dataclass or a
    pydantic model comes back as a dict), on success; ``None`` otherwise. ``error`` is
    the last failed attempt's error text where there is one (an abandoned execution's,
    an undecodable payload's reason).
    """

    task_name: str
    instance_id: str
    outcome: ResultOutcome
    value: Any
    error: str | None
    finished_at: datetime

    @property
    def succeeded(self) -> bool:
        """Whether the handler finished without an error."""
        return self.outcome == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``finished_at`` in ISO 8601), as the CLI prints it."""
        return {
            "task_name": self.task_name,
            "instance_id": self.instance_id,
            "outcome": self.outcome,
            "value": self.value,
            "error": self.error,
            "finished_at": self.finished_at.isoformat(),
        }


def encode_result(task_name: str, value: Any, max_size: int = DEFAULT_MAX_RESULT_SIZE) -> str:
    """The JSON text of ``value``, the result of a handler of ``task_name``, to keep.

    A dataclass or a pydantic model is kept as its JSON form. Raises ``PayloadError``
    naming the task when there is no JSON form that a database stores exactly (see
    ``_payload.normalize_json``) or when the text is longer than ``max_size`` bytes: the
    attempt then fails, and its retry policy applies.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "model_dump") and not isinstance(value, type):
        value = value.model_dump(mode="json")
    try:
        normalized = normalize_json(task_name, value)
        text = dumps_payload(normalized)
    except PayloadError as exc:
        raise PayloadError(str(exc).replace(": payload", ": result", 1)) from exc
    size = len(text.encode())
    if size > max_size:
        raise PayloadError(
            f"task {task_name!r}: result is {size:,} bytes of JSON, more than "
            f"max_result_size ({max_size:,} bytes); keep a reference to it instead"
        )
    return text


def decode_result(text: str | None) -> Any:
    """The value kept as ``text`` (``None`` when nothing was)."""
    return None if text is None else json.loads(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Kept:
    """A final outcome to keep: ``value`` is the JSON text of what the handler returned."""

    task_name: str
    instance_id: str
    outcome: ResultOutcome
    finished_at: datetime
    value: str | None = None
    error: str | None = None
    #: The group the execution was a member of, whose callback sees it.
    group_id: int | None = None

    def values(self) -> dict[str, Any]:
        return {
            "task_name": self.task_name,
            "task_instance": self.instance_id,
            "outcome": self.outcome,
            "value": self.value,
            "error": self.error,
            "finished_at": self.finished_at,
            "group_id": self.group_id,
        }


def kept(
    execution: Execution,
    outcome: ResultOutcome,
    now: datetime,
    *,
    value: str | None = None,
    error: str | None = None,
) -> Kept:
    """The final outcome of ``execution`` to keep, under its group if it has one."""
    return Kept(
        task_name=execution.task_name,
        instance_id=execution.instance_id,
        outcome=outcome,
        finished_at=now,
        value=value,
        error=error,
        group_id=execution.group_id,
    )
