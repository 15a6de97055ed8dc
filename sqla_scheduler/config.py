"""Scheduler settings: [`SchedulerConfig`][].

Build a config directly with ``timedelta`` values, or from text with
[`SchedulerConfig.from_mapping`][] (snake_case or kebab-case keys, durations such as
``"10s"``) or [`SchedulerConfig.from_env`][] (``SQLA_SCHEDULER_POLLING_INTERVAL=250ms``).
Every bad key or value raises [`ConfigurationError`][] naming the key as it was written and
the offending value.

```pycon
>>> from datetime import timedelta
>>> config = SchedulerConfig(concurrency=4, polling_interval=timedelta(seconds=2))
>>> config.dead_after
datetime.timedelta(seconds=1800)
>>> SchedulerConfig.from_mapping({"polling-interval": "250ms"}).polling_interval
datetime.timedelta(microseconds=250000)
>>> SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_CONCURRENCY": "4"}).concurrency
4
>>> config.replace(concurrency=8).concurrency
8

```
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import socket
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, NamedTuple

from sqla_scheduler._durations import format_duration, parse_duration
from sqla_scheduler._limits import (
    DEFAULT_MAX_RESULT_SIZE,
    MAX_CONCURRENCY,
    MAX_RESULT_SIZE,
    MAX_RETRIES,
    control_problem,
    text_problem,
)
from sqla_scheduler.exceptions import ConfigurationError

__all__ = ["SchedulerConfig"]

#: The longest scheduler name, the length of ``picked_by``.
_MAX_NAME = 255


#: The default names made so far, in this process and (inherited through ``fork``) in the
#: processes it was forked from.
_DEFAULT_NAMES: set[str] = set()


def _default_scheduler_name() -> str:
    """``<host name>-<pid>``: this process's name, unique among processes on one table.

    Looked up when a config is made; a config made before a ``fork`` (``gunicorn
    --preload``, a prefork pool) has the parent's pid, and ``for_this_process`` gives it
    the child's when its scheduler runs there. The host name is cut short where the name
    would be longer than 255 characters.
    """
    pid = f"-{os.getpid()}"
    name = socket.gethostname()[: _MAX_NAME - len(pid)] + pid
    _DEFAULT_NAMES.add(name)
    return name


def for_this_process(config: SchedulerConfig) -> SchedulerConfig:
    """``config``, or a copy named for this process when its ``scheduler_name`` is the
    default made in another one, before a ``fork``: two forked processes running with the
    parent's name would be one scheduler to the table (``picked_by``, the nodes table)."""
    name = config.scheduler_name
    if name not in _DEFAULT_NAMES or name == (own := _default_scheduler_name()):
        return config
    return dataclasses.replace(config, scheduler_name=own)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Settings of one scheduler process; immutable and validated on construction.

    Every number has bounds far from what a deployment needs and within what the loop
    handles; a value past one raises [`ConfigurationError`][] naming the key and the bound.

    Durations are ``timedelta`` values. Use [`from_mapping`][] or [`from_env`][] to read
    them from text, and [`replace`][] to derive a changed copy.
    """

    concurrency: int = 10
    """Executions run in parallel by this process (1 to 1000)."""
    polling_interval: timedelta = timedelta(seconds=10)
    """How long to sleep between polls when no wake-up arrives (1ms to 1d)."""
    heartbeat_interval: timedelta = timedelta(minutes=5)
    """How often a running execution's heartbeat is updated (1ms to 1d)."""
    missed_heartbeat_limit: int = 6
    """Missed heartbeats after which an execution is considered dead (1 to 1000)."""
    retry_base_delay: timedelta = timedelta(seconds=30)
    """Delay before the first retry of a failed execution (zero to 36500d)."""
    retry_backoff_rate: float = 1.5
    """Multiplier applied to the retry delay per consecutive failure (1.0 to 100.0)."""
    retry_max_delay: timedelta = timedelta(hours=1)
    """Upper bound on the retry delay (at least ``retry_base_delay``, at most 36500d)."""
    max_retries: int | None = None
    """Retries before a failing execution gives up (0 to 1,000,000), or ``None`` to retry
    forever."""
    scheduler_name: str = field(default_factory=_default_scheduler_name)
    """Name written to ``picked_by``; defaults to ``<host name>-<pid>``, unique per process
    (1 to 255 characters, none of them a control character)."""
    table_name: str = "scheduled_tasks"
    """Name of the scheduler's table (an identifier of at most 55 characters, so that its
    ``_history`` table's name fits PostgreSQL's 63)."""
    schema: str | None = None
    """Schema holding the table, or ``None`` for the connection's default."""
    shutdown_max_wait: timedelta = timedelta(minutes=30)
    """How long [`Scheduler.stop`][sqla_scheduler.Scheduler.stop] waits for running executions
    (zero to 1d)."""
    delete_unresolved_after: timedelta = timedelta(days=14)
    """Rows of unknown tasks older than this are deleted (1ms to 36500d)."""
    history: Literal["failures", "all", "none"] = "failures"
    """Which finished attempts the history table records: ``failures`` (every outcome but
    ``succeeded`` and ``snoozed``), ``all``, or ``none``."""
    history_retention: timedelta = timedelta(days=14)
    """History entries older than this are pruned (1ms to 36500d)."""
    node_heartbeat_interval: timedelta = timedelta(seconds=30)
    """How often a running scheduler records in the nodes table that it is alive (1ms to
    1d); it counts as alive for three intervals."""
    listen: bool = True
    """Whether to use PostgreSQL ``LISTEN``/``NOTIFY`` wake-ups. Behind a connection
    pooler in transaction mode (PgBouncer, RDS Proxy), which cannot carry LISTEN, the
    scheduler finds out, says so once and reads the earliest due time once a second
    instead; ``listen_url`` keeps the wake-ups."""
    listen_url: str | None = field(default=None, repr=False)
    """A PostgreSQL URL for the one connection that LISTENs, when the engine's goes
    through a pooler in transaction mode: a direct connection to the same database, so that
    wake-ups within milliseconds hold while every other statement goes through the
    pooler. ``None``: the engine's URL."""
    result_retention: timedelta = timedelta(days=14)
    """How long the result of a task with ``keep_result`` (or of a group's member) stays
    after it finished (1ms to 36500d), whatever ``history`` says."""
    max_result_size: int = DEFAULT_MAX_RESULT_SIZE
    """The largest result, as JSON text in bytes, that a task may keep (1 byte to 16MB);
    from text, ``"64KB"`` or ``"1MB"`` (KB = 1024 bytes) or a number of bytes. A larger
    result fails the attempt, naming the task."""
    cancel_grace: timedelta = timedelta(seconds=30)
    """How long a handler asked to stop (``cancel`` on a running execution) may run on
    before its execution is recorded ``cancelled`` anyway (zero to 1d); what it returns
    after that is discarded."""
    stats: bool = True
    """Whether each scheduler counts the executions it finishes, per minute, task and
    outcome with their start lags and durations, in the ``<table>_stats`` table for the
    admin page's charts (added every few seconds; pruned after ``history_retention``, a
    day at least)."""
    prepared_statements: bool = True
    """Whether the scheduler's connections may use server-side prepared statements (turn
    off behind PgBouncer in transaction mode)."""
    pick_lower_fraction: float = 0.5
    """Pick again when the executions in hand (picked or running) fall to this fraction of
    ``concurrency`` (more than 0, at most 10)."""
    pick_upper_fraction: float = 3.0
    """Hold at most this fraction of ``concurrency`` in hand, picked or running (at least
    ``pick_lower_fraction``, at most 10)."""

    def __post_init__(self) -> None:
        """Check every field's type and limits, then the rules that relate fields."""
        for name, rule in _RULES.items():
            value = getattr(self, name)
            try:
                checked = rule.kind.check(value)
                if checked is not None:
                    rule.limit(checked)
            except _Invalid as exc:
                raise _FieldError(((name, value, str(exc)),)) from None
            if checked is not value:
                object.__setattr__(self, name, checked)
        for low, high in _ORDERED:
            low_value, high_value = getattr(self, low), getattr(self, high)
            if high_value < low_value:
                raise _FieldError(
                    (
                        (high, high_value, f"must be at least {low} ({_show(low_value)})"),
                        (low, low_value, f"must not exceed {high} ({_show(high_value)})"),
                    )
                )

    @property
    def dead_after(self) -> timedelta:
        """How long without a heartbeat before an execution counts as dead.

        ``heartbeat_interval * missed_heartbeat_limit``: 30 minutes by default.
        """
        return self.heartbeat_interval * self.missed_heartbeat_limit

    @property
    def revive_interval(self) -> timedelta:
        """How often to look for dead executions: ``heartbeat_interval * 2``."""
        return self.heartbeat_interval * 2

    def retry_delay(self, consecutive_failures: int) -> timedelta:
        """Return the delay before retrying after ``consecutive_failures`` failures in a row.

        ``retry_base_delay * retry_backoff_rate ** (consecutive_failures - 1)``, capped at
        ``retry_max_delay``; 30s, 45s, 67.5s, ... up to 1h with the defaults. Raises
        ``ValueError`` when ``consecutive_failures`` is less than 1.
        """
        if isinstance(consecutive_failures, bool) or not isinstance(consecutive_failures, int):
            raise TypeError(f"consecutive_failures must be an int, not {consecutive_failures!r}")
        if consecutive_failures < 1:
            raise ValueError(f"consecutive_failures must be at least 1, not {consecutive_failures}")
        return backoff(
            consecutive_failures,
            self.retry_base_delay,
            self.retry_backoff_rate,
            self.retry_max_delay,
        )

    def replace(self, **changes: Any) -> SchedulerConfig:
        """Return a copy with ``changes`` applied, validated like a new config.

        ```pycon
        >>> SchedulerConfig().replace(concurrency=2).concurrency
        2

        ```
        """
        for name in changes:
            if name not in _RULES:
                raise ConfigurationError(_unknown(name, name, _KEYS))
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> SchedulerConfig:
        """Build a config from keys and values as read from a settings file.

        Keys are field names in snake_case (``polling_interval``) or kebab-case
        (``polling-interval``); missing keys take their defaults. Values may be text:
        durations such as ``"250ms"``, ``"10s"``, ``"5m"``, ``"1h"`` or ``"14d"`` (or a
        ``timedelta``; a number, or text that is one, is that many seconds),
        integers and floats as numbers or numeric strings, booleans as ``true``/``false``,
        ``yes``/``no``, ``on``/``off`` or ``1``/``0``. ``""`` or ``"none"`` leaves
        ``max_retries`` unset, and ``""`` leaves ``schema`` unset.

        ```pycon
        >>> SchedulerConfig.from_mapping({"max_retries": "3", "listen": "off"}).max_retries
        3

        ```
        """
        return cls._from_named(mapping, _KEYS)

    @classmethod
    def from_env(
        cls, prefix: str = "SQLA_SCHEDULER_", environ: Mapping[str, str] | None = None
    ) -> SchedulerConfig:
        """Build a config from environment variables such as ``SQLA_SCHEDULER_CONCURRENCY=4``.

        Each variable is ``prefix`` plus an upper-case field name and is read like a
        [`from_mapping`][] value. A variable that starts with ``prefix`` but names no field
        is an error, so a typo fails loudly. ``environ`` defaults to ``os.environ``.

        ```pycon
        >>> env = {"SQLA_SCHEDULER_POLLING_INTERVAL": "250ms", "HOME": "/root"}
        >>> SchedulerConfig.from_env(environ=env).polling_interval.total_seconds()
        0.25

        ```
        """
        if not prefix:
            raise ConfigurationError("from_env() needs a non-empty prefix")
        source = os.environ if environ is None else environ
        named = {name: value for name, value in source.items() if name.startswith(prefix)}
        return cls._from_named(named, _env_spelling(prefix))

    def replace_from_env(
        self,
        prefix: str = "SQLA_SCHEDULER_",
        environ: Mapping[str, str] | None = None,
        *,
        ignore: Collection[str] = (),
    ) -> SchedulerConfig:
        """Return a copy with the ``prefix`` variables that are set applied over this config.

        What ``sqla-scheduler worker`` does with the application's config: fields no
        variable names keep their values. Variables are read as [`from_env`][] reads them,
        and an unknown one is an error that suggests the nearest name. ``ignore`` lists
        names that start with ``prefix`` but belong to someone else (the command line's own
        options, such as ``SQLA_SCHEDULER_LOG_LEVEL``): they are skipped, and suggested
        when a name is close to one of them.

        ```pycon
        >>> base = SchedulerConfig(concurrency=4, max_retries=3)
        >>> changed = base.replace_from_env(environ={"SQLA_SCHEDULER_CONCURRENCY": "8"})
        >>> changed.concurrency, changed.max_retries
        (8, 3)

        ```
        """
        if not prefix:
            raise ConfigurationError("replace_from_env() needs a non-empty prefix")
        source = os.environ if environ is None else environ
        named = {
            name: value
            for name, value in source.items()
            if name.startswith(prefix) and name not in ignore
        }
        return self._from_named(named, _env_spelling(prefix), base=self, others=ignore)

    @classmethod
    def _from_named(
        cls,
        mapping: Mapping[str, object],
        spelling: _Spelling,
        *,
        base: SchedulerConfig | None = None,
        others: Collection[str] = (),
    ) -> SchedulerConfig:
        """Coerce ``mapping`` (names spelled as ``spelling`` says) and build the config, or
        apply it over ``base``; ``others`` are valid names that set no field."""
        values: dict[str, Any] = {}
        written: dict[str, tuple[str, object]] = {}
        for name, raw in mapping.items():
            if not isinstance(name, str):
                raise ConfigurationError(f"{spelling.what} {name!r} is not a string")
            key = spelling.to_field(name)
            if key not in _RULES or spelling.to_name(key, name) != name:
                raise ConfigurationError(_unknown(name, key, spelling, others))
            if key in written:
                first = written[key][0]
                raise ConfigurationError(f"{first!r} and {name!r} both set {key}; keep one")
            try:
                values[key] = _RULES[key].kind.coerce(raw)
            except _Invalid as exc:
                raise ConfigurationError(_message(name, repr(raw), str(exc))) from None
            written[key] = (name, raw)
        try:
            return cls(**values) if base is None else dataclasses.replace(base, **values)
        except _FieldError as exc:
            for key, _value, reason in exc.problems:
                if key in written:
                    name, raw = written[key]
                    raise ConfigurationError(_message(name, repr(raw), reason)) from None
            raise


# --- errors -----------------------------------------------------------------------------------


class _Invalid(Exception):
    """A value breaks one field's rule; the message is the reason, e.g. ``must be at least 1``."""


class _FieldError(ConfigurationError):
    """A field failed validation in ``__post_init__``.

    ``problems`` lists ``(field, value, reason)``, most relevant first; a cross-field problem
    lists each field involved, so ``SchedulerConfig.from_mapping`` can blame the key the
    user actually wrote.
    """

    def __init__(self, problems: tuple[tuple[str, object, str], ...]) -> None:
        name, value, reason = problems[0]
        super().__init__(_message(name, _show(value), reason))
        self.problems = problems


def _message(name: str, shown: str, reason: str) -> str:
    return _PASSWORD.sub(r"\1***@", f"{name}: {shown} {reason}")


#: The password of a URL in a message (``listen_url``): ``scheme://user:PASSWORD@``.
_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def _show(value: object) -> str:
    """Write a value for an error message: durations compactly, everything else as repr."""
    if isinstance(value, timedelta):
        return format_duration(value) if value >= timedelta(0) else f"-{format_duration(-value)}"
    return repr(value)


# --- how names are spelled ----------------------------------------------------------------------


class _Spelling(NamedTuple):
    """How one source spells field names."""

    what: str
    """What a name is called in messages, e.g. ``configuration key``."""
    to_field: Callable[[str], str]
    """Map a name as written to the field it would denote."""
    to_name: Callable[[str, str], str]
    """Spell a field the way this source would, in the style of a name the user wrote."""


_KEYS = _Spelling(
    what="configuration key",
    to_field=lambda name: name.replace("-", "_").lower(),
    to_name=lambda key, like: key.replace("_", "-") if "-" in like else key,
)


def _env_spelling(prefix: str) -> _Spelling:
    return _Spelling(
        what="environment variable",
        to_field=lambda name: name[len(prefix) :].replace("-", "_").lower(),
        to_name=lambda key, like: prefix + key.upper(),
    )


def _unknown(name: str, key: str, spelling: _Spelling, others: Collection[str] = ()) -> str:
    """Message for a name that denotes no field, with the closest match as a suggestion.

    ``others`` are names, spelled as the source spells them, that are valid without being
    fields; names are compared without their prefix, which every name shares.
    """
    known = {field: spelling.to_name(field, name) for field in _RULES}
    known.update((spelling.to_field(other), other) for other in others)
    matches = difflib.get_close_matches(key, known, n=1)
    if matches:
        hint = f"did you mean {known[matches[0]]!r}?"
    else:
        hint = "expected one of: " + ", ".join(known.values())
    return f"unknown {spelling.what} {name!r} ({hint})"


# --- value kinds: constructor type checks and text coercion -------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_DURATION_HINT = "write a duration such as '10s' or '250ms', a number of seconds, or a timedelta"


class _Kind(NamedTuple):
    """One type of field value."""

    check: Callable[[object], object]
    """Constructor check: return the value (normalised) or raise ``_Invalid``."""
    coerce: Callable[[object], object]
    """``SchedulerConfig.from_mapping`` coercion of text and other spellings."""


def _check_int(value: object) -> object:
    if isinstance(value, bool):
        raise _Invalid("is a bool, not an integer")
    if not isinstance(value, int):
        raise _Invalid("is not an integer")
    return value


def _check_float(value: object) -> object:
    if isinstance(value, bool):
        raise _Invalid("is a bool, not a number")
    if not isinstance(value, (int, float)):
        raise _Invalid("is not a number")
    try:
        number = float(value)
    except OverflowError:
        raise _Invalid("is too large") from None
    if not math.isfinite(number):
        raise _Invalid("is not a finite number")
    return number


def _read_text(
    written: re.Pattern[str],
    read: Callable[[str], object],
    check: Callable[[object], object],
    *,
    kind: str,
) -> Callable[[object], object]:
    """A coercion that reads text ``written`` so with ``read`` (any other text is not a
    ``kind``) and checks any other value as the constructor does."""

    def coerce(raw: object) -> object:
        if isinstance(raw, str):
            if not written.fullmatch(raw.strip()):
                raise _Invalid(f"is not {kind}")
            return read(raw)
        return check(raw)

    return coerce


def _check_duration(value: object) -> object:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise _Invalid("is a bool, not a duration")
    if isinstance(value, (int, float)):
        raise _Invalid(
            "is a number, not a duration; pass a timedelta such as timedelta(seconds=10), "
            "or a duration string such as '10s' to from_mapping() or from_env()"
        )
    if isinstance(value, str):
        raise _Invalid("is a string, not a timedelta; use from_mapping() or from_env() to parse it")
    raise _Invalid("is not a timedelta")


def _coerce_duration(raw: object) -> object:
    if isinstance(raw, str):
        if _NUMBER.fullmatch(raw.strip()):
            return _seconds(float(raw))
        try:
            return parse_duration(raw)
        except OverflowError:
            raise _Invalid("is too large for a duration") from None
        except ValueError as exc:
            text, shown = str(exc), repr(raw)
            # parse_duration's message starts with the text; keep only the reason after it.
            reason = text[len(shown) :].lstrip() if text.startswith(shown) else text
            raise _Invalid(reason) from None
    if isinstance(raw, timedelta):
        return raw
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _seconds(raw)
    return _check_duration(raw)


def _seconds(number: float) -> timedelta:
    """A number in a mapping or the environment: that many seconds."""
    if not math.isfinite(number):
        raise _Invalid(f"is not a duration; {_DURATION_HINT}")
    if number < 0:
        raise _Invalid("is negative; a duration must be zero or more")
    try:
        return timedelta(seconds=number)
    except OverflowError:
        raise _Invalid("is too large for a duration") from None


def _check_bool(value: object) -> object:
    if not isinstance(value, bool):
        raise _Invalid("is not a bool")
    return value


def _coerce_bool(raw: object) -> object:
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise _Invalid("is not a boolean (use true/false, yes/no, on/off or 1/0)")
    return _check_bool(raw)


def _check_str(value: object) -> object:
    if not isinstance(value, str):
        raise _Invalid("is not a string")
    return value


def _one_of(*choices: str) -> _Kind:
    """One of ``choices``; from text, in any case and with spaces around it."""
    shown = ", ".join(repr(choice) for choice in choices)

    def check(value: object) -> object:
        if value not in choices:
            raise _Invalid(f"is not one of {shown}")
        return value

    def coerce(raw: object) -> object:
        return check(raw.strip().lower() if isinstance(raw, str) else raw)

    return _Kind(check, coerce)


def _optional(kind: _Kind, none_words: frozenset[str]) -> _Kind:
    """``kind`` or ``None``; from text, any of ``none_words`` (any case) also means ``None``."""

    def check(value: object) -> object:
        return None if value is None else kind.check(value)

    def coerce(raw: object) -> object:
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in none_words):
            return None
        return kind.coerce(raw)

    return _Kind(check, coerce)


_INT = _Kind(_check_int, _read_text(_INTEGER, int, _check_int, kind="an integer"))
_FLOAT = _Kind(_check_float, _read_text(_NUMBER, float, _check_float, kind="a number"))
_DURATION = _Kind(_check_duration, _coerce_duration)
_BOOL = _Kind(_check_bool, _coerce_bool)
_STR = _Kind(_check_str, _check_str)


def _coerce_size(raw: object) -> object:
    if isinstance(raw, str):
        match = _SIZE_TEXT.fullmatch(raw.strip())
        if match is None:
            raise _Invalid("is not a size (try '65536', '64KB' or '1MB')")
        number, unit = match.groups()
        return int(number) * _SIZE_UNITS[unit.upper()]
    return _check_int(raw)


_SIZE_TEXT = re.compile(r"([0-9]+)\s*([KMG]i?B|B|)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "B": 1, "KB": 1024, "KIB": 1024, "MB": 1024**2, "MIB": 1024**2}
_SIZE_UNITS |= {"GB": 1024**3, "GIB": 1024**3}
_SIZE = _Kind(_check_int, _coerce_size)


def backoff(failures: int, base: timedelta, rate: float, cap: timedelta) -> timedelta:
    """The delay before the retry after ``failures`` (at least 1) failures in a row:
    ``base * rate ** (failures - 1)``, at most ``cap``. A task's own backoff settings
    (``retry_base_delay`` and the others, given to its decorator) use it too."""
    if not base:
        return base
    try:
        delay = base * rate ** (failures - 1)
    except OverflowError:
        return cap
    return min(delay, cap)


def read_setting(name: str, value: object) -> Any:
    """``value`` for the field ``name``, read as [`SchedulerConfig.from_mapping`][] reads
    it (a duration may be a ``timedelta``, a number of seconds or text such as ``"30s"``)
    and within the field's bounds; else a ``ValueError`` that says what is wrong with it
    (``"must be at least 1.0"``). For the settings a task may set for itself."""
    rule = _RULES[name]
    try:
        read = rule.kind.coerce(value)
        if read is not None:
            rule.limit(read)
    except _Invalid as exc:
        raise ValueError(str(exc)) from None
    return read


# --- limits on checked values -------------------------------------------------------------------

_Limit = Callable[[Any], None]


def _between(low: Any, high: Any, *, above: bool = False) -> _Limit:
    """From ``low`` (or more than ``low`` when ``above``) to ``high``; the message gives
    the bound that was passed."""

    def limit(value: Any) -> None:
        if value < low or (above and value == low):
            raise _Invalid(f"must be {'greater than' if above else 'at least'} {_bound(low)}")
        if value > high:
            raise _Invalid(f"must be at most {_bound(high)}")

    return limit


def _bound(value: Any) -> str:
    """A bound as messages and the documentation write it: ``1ms``, ``36500d``, ``1000``."""
    if isinstance(value, timedelta):
        return format_duration(value) if value else "zero"
    if isinstance(value, float) and value.is_integer():
        return "0" if value == 0 else f"{value:.1f}"
    return str(value)


def _name(max_length: int, *, identifier: bool) -> _Limit:
    def limit(value: str) -> None:
        if not value.strip():
            raise _Invalid("must not be empty")
        if len(value) > max_length:
            raise _Invalid(f"is longer than {max_length} characters")
        problem = text_problem(value) or control_problem(value)
        if problem is not None:
            raise _Invalid(problem)
        if identifier and not _IDENTIFIER.fullmatch(value):
            raise _Invalid(
                "is not an identifier (use letters, digits and underscores, "
                "not starting with a digit)"
            )

    return limit


def _no_limit(value: Any) -> None:
    """Any value of the right type will do."""


def _listen_url(value: str) -> None:
    from sqla_scheduler._dialects import listen_url_problem  # SQLAlchemy, when one is given

    problem = listen_url_problem(value)
    if problem is not None:
        raise _Invalid(problem)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ZERO = timedelta(0)
_MS = timedelta(milliseconds=1)
_DAY = timedelta(days=1)
#: The longest retry delay, retention and orphan age: about 100 years, so that adding it
#: to any time the scheduler stores cannot overflow a ``datetime``.
_LONGEST = timedelta(days=36500)


class _Rule(NamedTuple):
    kind: _Kind
    limit: _Limit


_RULES: dict[str, _Rule] = {
    "concurrency": _Rule(_INT, _between(1, MAX_CONCURRENCY)),
    "polling_interval": _Rule(_DURATION, _between(_MS, _DAY)),
    "heartbeat_interval": _Rule(_DURATION, _between(_MS, _DAY)),
    "missed_heartbeat_limit": _Rule(_INT, _between(1, 1000)),
    "retry_base_delay": _Rule(_DURATION, _between(_ZERO, _LONGEST)),
    "retry_backoff_rate": _Rule(_FLOAT, _between(1.0, 100.0)),
    "retry_max_delay": _Rule(_DURATION, _between(_ZERO, _LONGEST)),
    "max_retries": _Rule(_optional(_INT, frozenset({"", "none"})), _between(0, MAX_RETRIES)),
    "scheduler_name": _Rule(_STR, _name(_MAX_NAME, identifier=False)),
    "table_name": _Rule(_STR, _name(63 - len("_history"), identifier=True)),
    "schema": _Rule(_optional(_STR, frozenset({""})), _name(63, identifier=True)),
    "shutdown_max_wait": _Rule(_DURATION, _between(_ZERO, _DAY)),
    "delete_unresolved_after": _Rule(_DURATION, _between(_MS, _LONGEST)),
    "history": _Rule(_one_of("failures", "all", "none"), _no_limit),
    "history_retention": _Rule(_DURATION, _between(_MS, _LONGEST)),
    "node_heartbeat_interval": _Rule(_DURATION, _between(_MS, _DAY)),
    "listen": _Rule(_BOOL, _no_limit),
    "listen_url": _Rule(_optional(_STR, frozenset({""})), _listen_url),
    "result_retention": _Rule(_DURATION, _between(_MS, _LONGEST)),
    "max_result_size": _Rule(_SIZE, _between(1, MAX_RESULT_SIZE)),
    "cancel_grace": _Rule(_DURATION, _between(_ZERO, _DAY)),
    "stats": _Rule(_BOOL, _no_limit),
    "prepared_statements": _Rule(_BOOL, _no_limit),
    "pick_lower_fraction": _Rule(_FLOAT, _between(0.0, 10.0, above=True)),
    "pick_upper_fraction": _Rule(_FLOAT, _between(0.0, 10.0, above=True)),
}
"""Per-field type and limit, in field order; ``__post_init__`` and the text readers use it."""

_ORDERED: tuple[tuple[str, str], ...] = (
    ("retry_base_delay", "retry_max_delay"),
    ("pick_lower_fraction", "pick_upper_fraction"),
)
"""Pairs ``(low, high)`` of fields where ``high`` must be at least ``low``."""
