"""The floor of commit-to-start latency: a process that does what a scheduler must do
between a commit and a start, in raw SQL on one psycopg connection, and nothing more.

It ``LISTEN``s on a channel; on each notification it picks the due rows in one
``UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING`` that commits without waiting for the
disk (as the library's pick does), and prints ``START <instance> <time> 0`` for each row
it picked, the time taken when the pick returned. It speaks ``bench/worker.py``'s
protocol (``READY``, ``START``, ``STOPPED``) and takes its arguments, so the bench starts
it as it starts a worker; it reads only ``--url``.

Run by the bench (``floor_latency``), not by hand.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType

import psycopg

CHANNEL = "bench_raw_floor"
PICK_SQL = (
    "UPDATE scheduled_tasks SET picked = true, picked_by = 'raw', last_heartbeat = now(),"
    " version = version + 1"
    " WHERE (task_name, task_instance) IN ("
    "SELECT task_name, task_instance FROM scheduled_tasks"
    " WHERE picked = false AND execution_time <= now()"
    " ORDER BY priority DESC, execution_time LIMIT 10 FOR UPDATE SKIP LOCKED)"
    " AND set_config('synchronous_commit', 'off', true) = 'off'"
    " RETURNING task_instance"
)

_stopping = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _stopping
    _stopping = True


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args, _ = parser.parse_known_args()
    dsn = args.url.replace("postgresql+psycopg://", "postgresql://", 1)
    signal.signal(signal.SIGTERM, _on_sigterm)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        _emit("READY")
        while not _stopping:
            # The generator holds the connection until it ends: pick after it.
            if list(conn.notifies(timeout=0.2, stop_after=1)):
                for (instance,) in conn.execute(PICK_SQL).fetchall():
                    _emit(f"START {instance} {time.time():.6f} 0")
    _emit("STOPPED")


if __name__ == "__main__":
    main()
