"""One application, two kinds of process: ``web`` only schedules, ``tasks`` runs in a worker.

Start the worker with::

    DATABASE_URL=postgresql+psycopg://app@localhost/app \\
        sqla-scheduler worker examples.worker_split.tasks:scheduler

and schedule from the web side with ``python -m examples.worker_split.web ada bob``.
"""
