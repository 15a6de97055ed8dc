"""What test modules share: the suite's clock, the database harness, waiting, and the
databases beside it. The throwaway servers are in ``tests.support.servers``; the fixtures
that start them, in ``tests/conftest.py``."""

from tests.support.clocks import NOW, manual_clock
from tests.support.databases import (
    async_mariadb_url,
    empty_databases,
    migrated_url,
    sqlite_file_url,
)
from tests.support.harness import Harness, services
from tests.support.waiting import wait_for

__all__ = [
    "NOW",
    "Harness",
    "async_mariadb_url",
    "empty_databases",
    "manual_clock",
    "migrated_url",
    "services",
    "sqlite_file_url",
    "wait_for",
]
