"""Tests of :mod:`sqla_scheduler.config`: defaults, validation, text readers and derived values."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import config as config_module
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.exceptions import ConfigurationError

DEFAULTS: dict[str, object] = {
    "concurrency": 10,
    "polling_interval": timedelta(seconds=10),
    "heartbeat_interval": timedelta(minutes=5),
    "missed_heartbeat_limit": 6,
    "retry_base_delay": timedelta(seconds=30),
    "retry_backoff_rate": 1.5,
    "retry_max_delay": timedelta(hours=1),
    "max_retries": None,
    "table_name": "scheduled_tasks",
    "schema": None,
    "shutdown_max_wait": timedelta(minutes=30),
    "delete_unresolved_after": timedelta(days=14),
    "history": "failures",
    "history_retention": timedelta(days=14),
    "node_heartbeat_interval": timedelta(seconds=30),
    "listen": True,
    "listen_url": None,
    "result_retention": timedelta(days=14),
    "max_result_size": 65536,
    "cancel_grace": timedelta(seconds=30),
    "stats": True,
    "prepared_statements": True,
    "pick_lower_fraction": 0.5,
    "pick_upper_fraction": 3.0,
}

# Every key set to a non-default value, written as text, and the value it must produce.
AS_TEXT: dict[str, tuple[str, object]] = {
    "concurrency": ("4", 4),
    "polling_interval": ("250ms", timedelta(milliseconds=250)),
    "heartbeat_interval": ("1m", timedelta(minutes=1)),
    "missed_heartbeat_limit": ("3", 3),
    "retry_base_delay": ("5s", timedelta(seconds=5)),
    "retry_backoff_rate": ("2.5", 2.5),
    "retry_max_delay": ("2h", timedelta(hours=2)),
    "max_retries": ("7", 7),
    "scheduler_name": ("worker-1", "worker-1"),
    "table_name": ("jobs", "jobs"),
    "schema": ("scheduler", "scheduler"),
    "shutdown_max_wait": ("90s", timedelta(seconds=90)),
    "delete_unresolved_after": ("7d", timedelta(days=7)),
    "history": ("All", "all"),
    "history_retention": ("30d", timedelta(days=30)),
    "node_heartbeat_interval": ("5s", timedelta(seconds=5)),
    "listen": ("false", False),
    "listen_url": ("postgresql://app@db/app", "postgresql://app@db/app"),
    "result_retention": ("2d", timedelta(days=2)),
    "max_result_size": ("1MB", 1024 * 1024),
    "cancel_grace": ("5s", timedelta(seconds=5)),
    "stats": ("no", False),
    "prepared_statements": ("off", False),
    "pick_lower_fraction": ("0.25", 0.25),
    "pick_upper_fraction": ("4", 4.0),
}

FIELD_NAMES = [f.name for f in dataclasses.fields(SchedulerConfig)]


def kebab(key: str) -> str:
    return key.replace("_", "-")


def env_name(key: str) -> str:
    return "SQLA_SCHEDULER_" + key.upper()


# --- defaults and structure ---------------------------------------------------------------------


def test_defaults_match_the_documented_table() -> None:
    config = SchedulerConfig()
    actual = {name: getattr(config, name) for name in DEFAULTS}
    assert actual == DEFAULTS
    assert config.scheduler_name == f"{socket.gethostname()}-{os.getpid()}"


def test_test_tables_cover_every_field() -> None:
    assert set(FIELD_NAMES) == set(DEFAULTS) | {"scheduler_name"}
    assert set(FIELD_NAMES) == set(AS_TEXT)
    assert list(config_module._RULES) == FIELD_NAMES


def test_scheduler_name_is_the_host_name_looked_up_per_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "host-a")
    first = SchedulerConfig()
    monkeypatch.setattr(socket, "gethostname", lambda: "host-b")
    pid = os.getpid()
    assert (first.scheduler_name, SchedulerConfig().scheduler_name) == (
        f"host-a-{pid}",
        f"host-b-{pid}",
    )


def test_a_long_host_name_is_cut_so_that_the_name_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "h" * 300)
    name = SchedulerConfig().scheduler_name
    assert len(name) == 255
    assert name.endswith(f"h-{os.getpid()}")


def test_processes_with_the_default_config_have_names_of_their_own() -> None:
    """Two real processes: each default name is its host name and its own pid."""
    script = (
        "import os, socket; from sqla_scheduler import SchedulerConfig; "
        "print(socket.gethostname(), os.getpid(), SchedulerConfig().scheduler_name)"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    seen = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        host, pid, name = out.split()
        assert name == f"{host}-{pid}"
        seen.append(name)
    assert seen[0] != seen[1]


def test_derived_durations_with_defaults() -> None:
    config = SchedulerConfig()
    assert config.dead_after == timedelta(minutes=30)
    assert config.revive_interval == timedelta(minutes=10)


def test_derived_durations_follow_the_fields() -> None:
    config = SchedulerConfig(heartbeat_interval=timedelta(seconds=10), missed_heartbeat_limit=3)
    assert config.dead_after == timedelta(seconds=30)
    assert config.revive_interval == timedelta(seconds=20)


def test_config_is_frozen_and_slotted() -> None:
    config = SchedulerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.concurrency = 3  # type: ignore[misc]
    assert config.concurrency == 10
    assert not hasattr(config, "__dict__")


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        SchedulerConfig(5)  # type: ignore[call-arg]


def test_configs_with_equal_fields_are_equal() -> None:
    assert SchedulerConfig(scheduler_name="a") == SchedulerConfig(scheduler_name="a")
    assert SchedulerConfig(scheduler_name="a") != SchedulerConfig(scheduler_name="b")


def test_int_given_for_a_float_field_is_stored_as_float() -> None:
    config = SchedulerConfig(retry_backoff_rate=2, pick_upper_fraction=5)
    assert type(config.retry_backoff_rate) is float
    assert type(config.pick_upper_fraction) is float
    assert (config.retry_backoff_rate, config.pick_upper_fraction) == (2.0, 5.0)


def test_boundary_values_are_accepted() -> None:
    config = SchedulerConfig(
        concurrency=1,
        missed_heartbeat_limit=1,
        retry_base_delay=timedelta(0),
        retry_backoff_rate=1.0,
        retry_max_delay=timedelta(0),
        max_retries=0,
        scheduler_name="n" * 255,
        table_name="t" * 55,
        shutdown_max_wait=timedelta(0),
        pick_lower_fraction=0.1,
        pick_upper_fraction=0.1,
    )
    assert config.max_retries == 0
    assert config.retry_delay(5) == timedelta(0)


# --- constructor validation ---------------------------------------------------------------------

INVALID_FIELDS: list[tuple[str, object, str]] = [
    ("concurrency", 0, "0"),
    ("concurrency", -3, "-3"),
    ("concurrency", 2.0, "2.0"),
    ("concurrency", "10", "'10'"),
    ("concurrency", True, "True"),
    ("polling_interval", timedelta(0), "0s"),
    ("polling_interval", timedelta(seconds=-5), "-5s"),
    ("polling_interval", 10, "10"),
    ("polling_interval", 0.5, "0.5"),
    ("polling_interval", "10s", "'10s'"),
    ("polling_interval", None, "None"),
    ("heartbeat_interval", timedelta(0), "0s"),
    ("heartbeat_interval", timedelta.max, "999999999d"),
    ("missed_heartbeat_limit", 0, "0"),
    ("missed_heartbeat_limit", False, "False"),
    ("retry_base_delay", timedelta(seconds=-1), "-1s"),
    ("retry_backoff_rate", 0.9, "0.9"),
    ("retry_backoff_rate", float("nan"), "nan"),
    ("retry_backoff_rate", float("inf"), "inf"),
    ("retry_backoff_rate", True, "True"),
    ("retry_backoff_rate", "1.5", "'1.5'"),
    ("retry_max_delay", timedelta(seconds=29), "29s"),
    ("max_retries", -1, "-1"),
    ("max_retries", True, "True"),
    ("max_retries", 1.0, "1.0"),
    ("scheduler_name", "", "''"),
    ("scheduler_name", "   ", "'   '"),
    ("scheduler_name", "n" * 256, "n" * 256),
    ("scheduler_name", None, "None"),
    ("table_name", "", "''"),
    ("table_name", "t" * 56, "t" * 56),
    ("table_name", "1tasks", "'1tasks'"),
    ("table_name", "scheduled-tasks", "'scheduled-tasks'"),
    ("table_name", "tasks; drop", "'tasks; drop'"),
    ("schema", "", "''"),
    ("history", "some", "'some'"),
    ("history", None, "None"),
    ("history_retention", timedelta(0), "0s"),
    ("node_heartbeat_interval", timedelta(0), "0s"),
    ("schema", "my schema", "'my schema'"),
    ("shutdown_max_wait", timedelta(seconds=-1), "-1s"),
    ("delete_unresolved_after", timedelta(0), "0s"),
    ("listen", 1, "1"),
    ("listen", "true", "'true'"),
    ("pick_lower_fraction", 0.0, "0.0"),
    ("pick_lower_fraction", -0.5, "-0.5"),
    ("pick_upper_fraction", 0.4, "0.4"),
    ("pick_upper_fraction", "3", "'3'"),
]


@pytest.mark.parametrize(("key", "value", "shown"), INVALID_FIELDS)
def test_constructor_rejects_invalid_value_naming_field_and_value(
    key: str, value: object, shown: str
) -> None:
    kwargs: dict[str, Any] = {key: value}
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(**kwargs)
    message = str(caught.value)
    assert message.startswith(f"{key}: ")
    assert shown in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("key", ["concurrency", "missed_heartbeat_limit", "max_retries"])
@pytest.mark.parametrize("value", [True, False])
def test_bools_are_not_accepted_as_ints(key: str, value: bool) -> None:
    kwargs: dict[str, Any] = {key: value}
    with pytest.raises(ConfigurationError, match=f"^{key}: {value} is a bool, not an integer"):
        SchedulerConfig(**kwargs)
    with pytest.raises(ConfigurationError, match=f"^{key}: {value} is a bool, not an integer"):
        SchedulerConfig.from_mapping({key: value})


def test_number_for_a_duration_hints_at_timedelta_and_duration_string() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(polling_interval=10)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("polling_interval: 10 ")
    assert "timedelta(seconds=10)" in message
    assert "'10s'" in message


def test_cross_field_errors_mention_both_fields() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(retry_base_delay=timedelta(minutes=2), retry_max_delay=timedelta(minutes=1))
    assert str(caught.value) == "retry_max_delay: 1m must be at least retry_base_delay (2m)"
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(pick_lower_fraction=2.0, pick_upper_fraction=1.0)
    assert (
        str(caught.value) == "pick_upper_fraction: 1.0 must be at least pick_lower_fraction (2.0)"
    )


# --- from_mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize("style", [str, kebab], ids=["snake", "kebab"])
def test_from_mapping_reads_every_key_in_either_style(style: Any) -> None:
    config = SchedulerConfig.from_mapping({style(key): text for key, (text, _) in AS_TEXT.items()})
    assert {key: getattr(config, key) for key in AS_TEXT} == {
        key: value for key, (_, value) in AS_TEXT.items()
    }


def test_from_mapping_accepts_mixed_styles_and_typed_values() -> None:
    config = SchedulerConfig.from_mapping(
        {
            "polling-interval": timedelta(seconds=3),
            "concurrency": 4,
            "retry-backoff-rate": 2,
            "listen": False,
            "max-retries": 0,
        }
    )
    assert (
        config.polling_interval,
        config.concurrency,
        config.retry_backoff_rate,
        config.listen,
        config.max_retries,
    ) == (timedelta(seconds=3), 4, 2.0, False, 0)
    assert type(config.retry_backoff_rate) is float


def test_from_mapping_empty_gives_defaults() -> None:
    assert SchedulerConfig.from_mapping({}) == SchedulerConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", timedelta(milliseconds=250)),
        ("10s", timedelta(seconds=10)),
        ("5m", timedelta(minutes=5)),
        ("1h", timedelta(hours=1)),
        ("14d", timedelta(days=14)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        (" 2m ", timedelta(minutes=2)),
        ("1.5s", timedelta(seconds=1.5)),
    ],
)
def test_from_mapping_duration_formats(text: str, expected: timedelta) -> None:
    assert SchedulerConfig.from_mapping({"history_retention": text}).history_retention == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("On", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("OFF", False),
        (True, True),
        (False, False),
    ],
)
def test_from_mapping_boolean_spellings(text: object, expected: bool) -> None:
    assert SchedulerConfig.from_mapping({"listen": text}).listen is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", None), ("none", None), ("None", None), ("3", 3), (3, 3), ("0", 0)],
)
def test_from_mapping_max_retries(value: object, expected: int | None) -> None:
    assert SchedulerConfig.from_mapping({"max_retries": value}).max_retries == expected


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("", None), ("jobs", "jobs")])
def test_from_mapping_schema(value: object, expected: str | None) -> None:
    assert SchedulerConfig.from_mapping({"schema": value}).schema == expected


@pytest.mark.parametrize(("text", "expected"), [("12", 12), (" 12 ", 12), ("+12", 12)])
def test_from_mapping_int_strings(text: str, expected: int) -> None:
    assert SchedulerConfig.from_mapping({"concurrency": text}).concurrency == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("2", 2.0), ("1.25", 1.25), ("1e0", 1.0), (3, 3.0)]
)
def test_from_mapping_float_values(value: object, expected: float) -> None:
    assert (
        SchedulerConfig.from_mapping({"retry_backoff_rate": value}).retry_backoff_rate == expected
    )


INVALID_MAPPING_VALUES: list[tuple[str, object]] = [
    ("concurrency", "ten"),
    ("concurrency", "1.5"),
    ("concurrency", ""),
    ("concurrency", "0"),
    ("concurrency", 1.5),
    ("concurrency", True),
    ("concurrency", None),
    ("polling_interval", "10 parsecs"),
    ("polling_interval", ""),
    ("polling_interval", "0s"),
    ("polling_interval", "-5s"),
    ("polling_interval", None),
    ("heartbeat_interval", "soon"),
    ("missed_heartbeat_limit", "-1"),
    ("retry_base_delay", "2h"),
    ("retry_backoff_rate", "fast"),
    ("retry_backoff_rate", "0.5"),
    ("retry_backoff_rate", "nan"),
    ("retry_backoff_rate", "1e400"),
    ("retry_backoff_rate", False),
    ("retry_max_delay", "1s"),
    ("max_retries", "-1"),
    ("max_retries", "many"),
    ("max_retries", 2.0),
    ("scheduler_name", ""),
    ("scheduler_name", 42),
    ("table_name", "bad name"),
    ("table_name", "x" * 56),
    ("schema", "none of it"),
    ("schema", 5),
    ("shutdown_max_wait", "-1m"),
    ("delete_unresolved_after", "0d"),
    ("history", "everything"),
    ("history-retention", "0s"),
    ("node-heartbeat-interval", "soon"),
    ("listen", "maybe"),
    ("listen", 1),
    ("listen", ""),
    ("pick_lower_fraction", "0"),
    ("pick_upper_fraction", "0.1"),
]


@pytest.mark.parametrize("style", [str, kebab], ids=["snake", "kebab"])
@pytest.mark.parametrize(("key", "value"), INVALID_MAPPING_VALUES)
def test_from_mapping_rejects_invalid_value_naming_key_as_written_and_value(
    key: str, value: object, style: Any
) -> None:
    written = style(key)
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({written: value})
    message = str(caught.value)
    assert message.startswith(f"{written}: {value!r} ")
    assert type(caught.value) is ConfigurationError


def test_from_mapping_unparseable_duration_message() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"polling_interval": "10 parsecs"})
    assert str(caught.value) == (
        "polling_interval: '10 parsecs' is not a duration (try '250ms', '10s', '5m', '1h' or '14d')"
    )


@pytest.mark.parametrize(
    ("value", "seconds"), [(10, 10), (2.5, 2.5), ("10", 10), (" 3.5 ", 3.5), ("0.25", 0.25)]
)
def test_from_mapping_reads_a_number_as_seconds(value: object, seconds: float) -> None:
    config = SchedulerConfig.from_mapping({"retry-base-delay": value})
    assert config.retry_base_delay == timedelta(seconds=seconds)


def test_from_env_reads_a_number_as_seconds() -> None:
    environ = {"SQLA_SCHEDULER_POLLING_INTERVAL": "30", "SQLA_SCHEDULER_SHUTDOWN_MAX_WAIT": "90.5"}
    config = SchedulerConfig.from_env(environ=environ)
    assert config.polling_interval == timedelta(seconds=30)
    assert config.shutdown_max_wait == timedelta(seconds=90.5)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-5, "is negative; a duration must be zero or more"),
        ("-2.5", "is negative; a duration must be zero or more"),
        (float("inf"), "is not a duration; write a duration such as '10s'"),
        ("1e400", "is not a duration; write a duration such as '10s'"),
        (1e300, "is too large for a duration"),
    ],
)
def test_from_mapping_refuses_numbers_that_are_no_duration(value: object, reason: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"retry-base-delay": value})
    assert str(caught.value).startswith(f"retry-base-delay: {value!r} {reason}")


def test_a_number_of_seconds_is_checked_like_any_duration() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"polling_interval": 0})
    assert str(caught.value).startswith("polling_interval: 0 ")


def test_cross_field_error_blames_the_key_that_was_written() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"retry-base-delay": "2h"})
    assert str(caught.value) == "retry-base-delay: '2h' must not exceed retry_max_delay (1h)"
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"retry_base_delay": "2h", "retry_max_delay": "1h"})
    assert str(caught.value) == "retry_max_delay: '1h' must be at least retry_base_delay (2h)"
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"pick-lower-fraction": "5"})
    assert str(caught.value) == "pick-lower-fraction: '5' must not exceed pick_upper_fraction (3.0)"


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("polling_intervall", "polling_interval"),
        ("polling-intervall", "polling-interval"),
        ("concurency", "concurrency"),
        ("POLLING_INTERVAL", "polling_interval"),
        ("Listen", "listen"),
        ("retry-base_delay", "retry-base-delay"),
        ("max_retry", "max_retries"),
    ],
)
def test_from_mapping_unknown_key_suggests_close_match(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({key: "1"})
    assert str(caught.value) == (
        f"unknown configuration key {key!r} (did you mean {suggestion!r}?)"
    )


def test_from_mapping_unknown_key_without_close_match_lists_keys() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping({"zzz": "1"})
    message = str(caught.value)
    assert message.startswith("unknown configuration key 'zzz' (expected one of: concurrency, ")
    assert all(name in message for name in FIELD_NAMES)


def test_from_mapping_rejects_the_same_key_in_two_spellings() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_mapping(
            {"concurrency": "2", "polling_interval": "1s", "polling-interval": "2s"}
        )
    assert "'polling_interval'" in str(caught.value)
    assert "'polling-interval'" in str(caught.value)


def test_from_mapping_rejects_non_string_keys() -> None:
    with pytest.raises(ConfigurationError, match="configuration key 3 is not a string"):
        SchedulerConfig.from_mapping({3: "x"})  # type: ignore[dict-item]


# --- from_env -----------------------------------------------------------------------------------


def test_from_env_reads_every_key() -> None:
    environ = {env_name(key): text for key, (text, _) in AS_TEXT.items()}
    environ["PATH"] = "/usr/bin"
    environ["SQLA_OTHER"] = "ignored"
    config = SchedulerConfig.from_env(environ=environ)
    assert {key: getattr(config, key) for key in AS_TEXT} == {
        key: value for key, (_, value) in AS_TEXT.items()
    }


def test_from_env_without_variables_gives_defaults() -> None:
    assert SchedulerConfig.from_env(environ={"HOME": "/root"}) == SchedulerConfig()


def test_from_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQLA_SCHEDULER_POLLING_INTERVAL", "250ms")
    monkeypatch.setenv("SQLA_SCHEDULER_CONCURRENCY", "3")
    config = SchedulerConfig.from_env()
    assert (config.polling_interval, config.concurrency) == (timedelta(milliseconds=250), 3)


def test_from_env_custom_prefix() -> None:
    environ = {"JOBS_CONCURRENCY": "2", "SQLA_SCHEDULER_CONCURRENCY": "9"}
    assert SchedulerConfig.from_env("JOBS_", environ).concurrency == 2


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("SQLA_SCHEDULER_POLLING_INTERVALL", "SQLA_SCHEDULER_POLLING_INTERVAL"),
        ("SQLA_SCHEDULER_polling_interval", "SQLA_SCHEDULER_POLLING_INTERVAL"),
        ("SQLA_SCHEDULER_CONCURENCY", "SQLA_SCHEDULER_CONCURRENCY"),
    ],
)
def test_from_env_rejects_unknown_prefixed_variable(name: str, suggestion: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_env(environ={name: "1s"})
    assert str(caught.value) == (
        f"unknown environment variable {name!r} (did you mean {suggestion!r}?)"
    )


def test_from_env_unknown_variable_without_close_match_lists_variables() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_DATABASE_URL": "postgresql://"})
    message = str(caught.value)
    assert message.startswith("unknown environment variable 'SQLA_SCHEDULER_DATABASE_URL'")
    assert "SQLA_SCHEDULER_POLLING_INTERVAL" in message


def test_from_env_bad_value_names_the_variable() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_POLLING_INTERVAL": "10 parsecs"})
    assert str(caught.value).startswith("SQLA_SCHEDULER_POLLING_INTERVAL: '10 parsecs' is not a")
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_CONCURRENCY": "0"})
    assert str(caught.value) == "SQLA_SCHEDULER_CONCURRENCY: '0' must be at least 1"


def test_from_env_rejects_an_empty_prefix() -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        SchedulerConfig.from_env("", {"CONCURRENCY": "2"})


def test_replace_from_env_changes_only_what_is_set() -> None:
    base = SchedulerConfig(concurrency=4, max_retries=3, scheduler_name="app")
    env = {
        "SQLA_SCHEDULER_POLLING_INTERVAL": "250ms",
        "SQLA_SCHEDULER_MAX_RETRIES": "none",
        "HOME": "/root",
    }
    changed = base.replace_from_env(environ=env)
    assert changed == base.replace(polling_interval=timedelta(milliseconds=250), max_retries=None)
    assert base.replace_from_env(environ={}) == base


def test_replace_from_env_blames_the_variable_for_a_cross_field_problem() -> None:
    base = SchedulerConfig(retry_max_delay=timedelta(hours=1))
    with pytest.raises(ConfigurationError) as caught:
        base.replace_from_env(environ={"SQLA_SCHEDULER_RETRY_BASE_DELAY": "2h"})
    assert str(caught.value) == (
        "SQLA_SCHEDULER_RETRY_BASE_DELAY: '2h' must not exceed retry_max_delay (1h)"
    )


def test_replace_from_env_skips_ignored_names_and_suggests_them() -> None:
    ignore = ["SQLA_SCHEDULER_LOG_LEVEL"]
    env = {"SQLA_SCHEDULER_LOG_LEVEL": "debug", "SQLA_SCHEDULER_CONCURRENCY": "2"}
    assert SchedulerConfig().replace_from_env(environ=env, ignore=ignore).concurrency == 2
    for name, nearest in [
        ("SQLA_SCHEDULER_LOG_LEVL", "SQLA_SCHEDULER_LOG_LEVEL"),
        ("SQLA_SCHEDULER_CONCURRANCY", "SQLA_SCHEDULER_CONCURRENCY"),
    ]:
        with pytest.raises(ConfigurationError) as caught:
            SchedulerConfig().replace_from_env(environ={name: "1"}, ignore=ignore)
        assert (
            str(caught.value)
            == f"unknown environment variable {name!r} (did you mean {nearest!r}?)"
        )


# --- retry_delay --------------------------------------------------------------------------------


def test_retry_delay_sequence_with_defaults() -> None:
    config = SchedulerConfig()
    delays = [config.retry_delay(n).total_seconds() for n in range(1, 6)]
    assert delays == [30.0, 45.0, 67.5, 101.25, 151.875]


def test_retry_delay_is_capped_at_retry_max_delay() -> None:
    config = SchedulerConfig()
    delays = [config.retry_delay(n) for n in range(1, 40)]
    assert delays == sorted(delays)
    # 30s * 1.5**12 = 3892s is the first to exceed an hour.
    assert delays[11] < timedelta(hours=1)
    assert delays[12:] == [timedelta(hours=1)] * (len(delays) - 12)


@pytest.mark.parametrize("failures", [1_000, 10**6, 10**18, 10**100])
def test_retry_delay_huge_failure_counts_do_not_overflow(failures: int) -> None:
    assert SchedulerConfig().retry_delay(failures) == timedelta(hours=1)


@pytest.mark.parametrize("failures", [10**9, 10**18, 10**100])
def test_retry_delay_slow_backoff_with_huge_failure_counts_reaches_the_cap(failures: int) -> None:
    # 1.000001 ** 1e9 is about e ** 1000: the float power overflows, the delay is capped.
    slow = SchedulerConfig(retry_backoff_rate=1.000001, retry_max_delay=timedelta(days=400))
    assert slow.retry_delay(failures) == timedelta(days=400)
    # Not yet capped a thousand failures in: the growth is real, not a constant cap.
    assert slow.retry_delay(1_000) < timedelta(seconds=31)


def test_retry_delay_without_backoff_or_base() -> None:
    flat = SchedulerConfig(retry_backoff_rate=1.0)
    assert [flat.retry_delay(n) for n in (1, 2, 1000)] == [timedelta(seconds=30)] * 3
    immediate = SchedulerConfig(retry_base_delay=timedelta(0))
    assert immediate.retry_delay(10**6) == timedelta(0)


@pytest.mark.parametrize("failures", [0, -1])
def test_retry_delay_needs_at_least_one_failure(failures: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SchedulerConfig().retry_delay(failures)


def test_retry_delay_rejects_non_int() -> None:
    with pytest.raises(TypeError):
        SchedulerConfig().retry_delay(True)
    with pytest.raises(TypeError):
        SchedulerConfig().retry_delay(1.0)  # type: ignore[arg-type]


# --- replace ------------------------------------------------------------------------------------


def test_replace_returns_a_changed_copy() -> None:
    original = SchedulerConfig(scheduler_name="a")
    changed = original.replace(concurrency=3, polling_interval=timedelta(seconds=1))
    assert (changed.concurrency, changed.polling_interval) == (3, timedelta(seconds=1))
    assert changed.scheduler_name == "a"
    assert original.concurrency == 10


def test_replace_revalidates() -> None:
    with pytest.raises(ConfigurationError, match=r"^concurrency: 0 must be at least 1$"):
        SchedulerConfig().replace(concurrency=0)
    with pytest.raises(ConfigurationError, match="retry_max_delay"):
        SchedulerConfig().replace(retry_max_delay=timedelta(seconds=1))


def test_replace_rejects_unknown_field_with_suggestion() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig().replace(concurency=3)
    assert str(caught.value) == (
        "unknown configuration key 'concurency' (did you mean 'concurrency'?)"
    )


def _names_in_a_forked_child(*configs: SchedulerConfig) -> tuple[int, list[str]]:
    """The child's pid and each config's name there, after ``for_this_process``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        os.close(read)
        names = [config_module.for_this_process(c).scheduler_name for c in configs]
        os.write(write, "\n".join(names).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        names = pipe.read().split("\n")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return pid, names


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_default_name_made_before_a_fork_becomes_the_childs() -> None:
    default = SchedulerConfig()  # made here, as gunicorn --preload makes it in its master
    named = SchedulerConfig(scheduler_name="billing-1")
    child, (from_default, from_named) = _names_in_a_forked_child(default, named)
    assert default.scheduler_name == f"{socket.gethostname()}-{os.getpid()}"
    assert from_default == f"{socket.gethostname()}-{child}"
    assert from_named == "billing-1"  # a name the application chose is kept
    assert config_module.for_this_process(default) is default  # in its own process, as is


def test_listen_url_must_name_a_database_with_listen() -> None:
    with pytest.raises(Exception, match="only PostgreSQL has LISTEN"):
        SchedulerConfig(listen_url="sqlite:///app.db")
    with pytest.raises(Exception, match="SQLA_SCHEDULER_LISTEN_URL"):
        SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_LISTEN_URL": "nonsense://x"})
    url = "postgresql://app:s3cret@db:5432/app"
    config = SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_LISTEN_URL": url})
    assert config.listen_url == url
    assert "s3cret" not in repr(config)
    assert SchedulerConfig.from_mapping({"listen_url": ""}).listen_url is None


@pytest.mark.parametrize("url", ["nonsense://app:s3cret@db/app", "sqlite://app:s3cret@/x"])
def test_a_refused_listen_url_is_shown_without_its_password(url: str) -> None:
    with pytest.raises(ConfigurationError) as direct:
        SchedulerConfig(listen_url=url)
    with pytest.raises(ConfigurationError) as from_env:
        SchedulerConfig.from_env(environ={"SQLA_SCHEDULER_LISTEN_URL": url})
    for error in (direct, from_env):
        assert "s3cret" not in str(error.value)
        assert "app:***@" in str(error.value), str(error.value)
