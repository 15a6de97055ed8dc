"""Turning payloads into JSON and back.

A task without a ``payload_type`` stores any JSON value. With a ``payload_type``, payloads
are dataclasses, pydantic models or any type pydantic can validate; they are stored in
their JSON form and rebuilt before the handler sees them.

Each stored payload carries the version it was written with. A task at ``payload_version``
N decodes a version-k payload by first passing its JSON through its upcasters k, k+1, ...,
N-1 (upcaster k turns version k's JSON into version k+1's), then decoding that.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast, get_origin

from sqla_scheduler._app_code import calling, summary
from sqla_scheduler._checks import text_problem
from sqla_scheduler._types import UnreadableJSON
from sqla_scheduler.exceptions import PayloadError

__all__ = ["MAX_PAYLOAD_DEPTH", "PayloadCodec", "Upcaster", "codec_for", "normalize_json"]

P = TypeVar("P")

Upcaster = Callable[[Any], Any]
"""Turns one version's JSON form of a payload into the next version's."""

_REPR_LIMIT = 200

MAX_PAYLOAD_DEPTH = 200
"""How deep arrays and objects may nest in a payload. Far past what a payload needs, and
shallow enough that each step of decoding one (the copy the upcasters get, the upcasters,
``payload_type`` validation) has stack to spare under Python's default recursion limit."""


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def normalize_json(task_name: str, value: object) -> Any:
    """Return ``value`` as the database will give it back (tuples become lists, etc.).

    ``PayloadError`` when a supported database cannot store it exactly or the scheduler
    could not decode it: not JSON, arrays and objects nested more than
    ``MAX_PAYLOAD_DEPTH`` deep, or a string (key or value) with a NUL character or a lone
    surrogate (PostgreSQL refuses both; SQLite would store what PostgreSQL refuses).
    """
    # The plainest values come back as they are: no text to build and parse. (Exact
    # types: a subclass, such as an IntEnum, is stored as its JSON form.)
    if value is None or type(value) is bool or type(value) is int:
        return value
    if type(value) is str and text_problem(value) is None:
        return value
    try:
        text = json.dumps(value, allow_nan=False, default=_mapping)
        normalized = json.loads(text)
    except RecursionError:
        raise PayloadError(f"task {task_name!r}: payload is nested too deeply to store") from None
    except (TypeError, ValueError) as exc:
        raise PayloadError(
            f"task {task_name!r}: payload {_short(value)} is not JSON-serializable: {exc}"
        ) from exc
    # Nesting N deep takes N brackets: most payloads have too few to be walked for it.
    if text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH:
        depth = _depth(normalized)
        if depth > MAX_PAYLOAD_DEPTH:
            raise PayloadError(
                f"task {task_name!r}: payload nests arrays and objects {depth} deep; "
                f"at most {MAX_PAYLOAD_DEPTH} are allowed"
            )
    # ``json.dumps`` escapes every character outside ASCII, so these two cover each string
    # that may hold a NUL or a surrogate; only then is the payload walked for its path.
    if "\\u0000" in text or "\\ud" in text:
        try:
            problem = _unstorable(normalized, "payload")
        except RecursionError:
            problem = "payload is nested too deeply to store"
        if problem is not None:
            raise PayloadError(f"task {task_name!r}: {problem}")
    return normalized


def _mapping(value: object) -> Any:
    """A mapping that is no dict (``ctx.group.outcomes``, a ``MappingProxyType``) as the
    object it stands for; anything else is not JSON, as ``json.dumps`` says."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (a JSON value): 0 for a scalar."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in item if isinstance(child, (list, dict)))
    return deepest


def _unstorable(value: Any, path: str) -> str | None:
    """What in ``value`` (a JSON value) a database cannot store, and where; ``None``: nothing."""
    if isinstance(value, str):
        problem = text_problem(value)
        return None if problem is None else f"{path} {problem}: {_short(value)}"
    if isinstance(value, list):
        items: Any = enumerate(value)
    elif isinstance(value, dict):
        for key in value:
            problem = _unstorable(key, f"{path} key {_short(key)}")
            if problem is not None:
                return problem
        items = value.items()
    else:
        return None
    for key, item in items:
        problem = _unstorable(item, f"{path}[{key!r}]")
        if problem is not None:
            return problem
    return None


class PayloadCodec(Generic[P]):
    """Encodes a task's payloads to JSON-compatible values and decodes them back, bringing
    payloads of earlier versions up to ``version`` with ``upcasters`` on the way."""

    def __init__(
        self,
        task_name: str,
        payload_type: type[P] | None,
        version: int = 1,
        upcasters: Mapping[int, Upcaster] | None = None,
    ) -> None:
        self.task_name = task_name
        self.payload_type = payload_type
        #: The version this task writes, and reads after upcasting.
        self.version = version
        self._upcasters = dict(upcasters or {})
        self._adapter: Any = None
        if payload_type is not None and not _is_pydantic_model(payload_type):
            self._adapter = _type_adapter(task_name, payload_type)

    def encode(self, value: P) -> Any:
        """Return the JSON form of ``value`` as stored; ``PayloadError`` when it has none
        or a database cannot store it (see ``normalize_json``)."""
        return normalize_json(self.task_name, self.dump(value))

    def dump(self, value: P) -> Any:
        """The JSON form of ``value`` before it is checked and normalized."""
        if value is None:
            return None
        pt = self.payload_type
        if _is_plain_class(pt) and not isinstance(value, cast(type, pt)):
            raise PayloadError(
                f"task {self.task_name!r}: payload {_short(value)} is not a {_name(pt)}"
            )
        try:
            with calling(self.task_name, "payload_type serialization"):
                if pt is None:
                    raw: object = value
                elif self._adapter is not None:
                    raw = self._adapter.dump_python(value, mode="json")
                elif _is_pydantic_model(pt):
                    raw = cast(Any, value).model_dump(mode="json")
                else:
                    raw = dataclasses.asdict(cast(Any, value))
        except Exception as exc:
            raise PayloadError(
                f"task {self.task_name!r}: payload {_short(value)} cannot be encoded: {exc}"
            ) from exc
        return raw

    def decode(self, data: Any, version: int | None = None) -> P:
        """Rebuild a payload from its stored JSON form, written at ``version`` (``None``:
        this codec's own); ``PayloadError`` on mismatch, when the stored text is JSON that
        Python cannot load, when it cannot be brought up to this codec's version (see
        ``upcast``), or whatever else goes wrong (a ``RecursionError`` on a payload nested
        deeper than the upcasters or the ``payload_type`` can go, a ``SystemExit`` from a
        validator): a stored payload that does not decode is its row's problem alone."""
        try:
            return self._decode(data, version)
        except PayloadError:
            raise
        except Exception as exc:
            raise PayloadError(
                f"task {self.task_name!r}: stored payload {_short(data)} does not decode: "
                f"{summary(exc)}"
            ) from exc

    def _decode(self, data: Any, version: int | None) -> P:
        if isinstance(data, UnreadableJSON):
            raise PayloadError(
                f"task {self.task_name!r}: stored payload is JSON Python cannot load "
                "(nested too deeply or a number too long)"
            )
        if version is not None and version != self.version:
            data = self.upcast(data, version)
        pt = self.payload_type
        if pt is None or data is None:
            return cast(P, data)
        try:
            with calling(self.task_name, f"payload_type {_name(pt)}"):
                if self._adapter is not None:
                    return cast(P, self._adapter.validate_python(data))
                if _is_pydantic_model(pt):
                    return cast(P, cast(Any, pt).model_validate(data))
                return pt(**data)
        except Exception as exc:
            raise PayloadError(
                f"task {self.task_name!r}: stored payload {_short(data)} does not decode "
                f"as {_name(pt)}: {exc}"
            ) from exc

    def upcast(self, data: Any, version: int) -> Any:
        """The JSON form ``data`` of a version-``version`` payload brought up to this
        codec's version by the upcasters, each in turn. ``PayloadError`` for a version this
        task does not know (below 1 or above its own) or an upcaster that raises.

        The upcasters work on a copy: the stored payload as loaded stays as it was (it is
        what the row keeps when a handler returns no new one)."""
        if not 1 <= version <= self.version:
            raise PayloadError(
                f"task {self.task_name!r}: stored payload has version {version!r}; this task "
                f"reads versions 1 to {self.version} (payload_version={self.version})"
            )
        data = copy.deepcopy(data)
        for step in range(version, self.version):
            try:
                with calling(self.task_name, f"upcasters[{step}]"):
                    data = self._upcasters[step](data)
            except Exception as exc:
                raise PayloadError(
                    f"task {self.task_name!r}: upcasters[{step}] (version {step} to "
                    f"{step + 1}) failed on a stored version-{version} payload: {summary(exc)}"
                ) from exc
        return data


def _name(tp: object) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _is_plain_class(tp: object) -> bool:
    return isinstance(tp, type) and get_origin(tp) is None


def _is_pydantic_model(tp: object) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - depends on the environment
        return False
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _type_adapter(task_name: str, payload_type: type[Any]) -> Any:
    try:
        from pydantic import TypeAdapter
    except ImportError:
        if dataclasses.is_dataclass(payload_type):
            return None  # flat dataclasses still work without pydantic
        raise PayloadError(
            f"task {task_name!r}: payload_type {payload_type!r} needs pydantic; "
            "install sqla-scheduler[pydantic]"
        ) from None
    try:
        return TypeAdapter(payload_type)
    except Exception as exc:
        raise PayloadError(
            f"task {task_name!r}: payload_type {payload_type!r} is not supported: {exc}"
        ) from exc


def codec_for(
    task_name: str,
    payload_type: type[P] | None,
    version: int = 1,
    upcasters: Mapping[int, Upcaster] | None = None,
) -> PayloadCodec[P]:
    """Return the codec for a task's ``payload_type`` (``None``: any JSON value) at
    payload ``version``, with the ``upcasters`` that bring earlier versions up to it."""
    return PayloadCodec(task_name, payload_type, version, upcasters)
