"""Fault tests: real worker processes, a real PostgreSQL, real faults.

The worker fixtures are the concurrency suite's (``tests/concurrency/conftest.py``); what
the tests share besides is in ``tests.support.faults`` and ``tests.support.workers``.
"""

from tests.concurrency.conftest import app_db, backend, db_url, workers

__all__ = ["app_db", "backend", "db_url", "workers"]
