"""The web side: it schedules in its own transactions and never runs the loop.

``python -m examples.worker_split.web NAME...`` signs up users, each with a welcome
scheduled in the same transaction; a worker process sends them.
"""

from __future__ import annotations

import sys

from sqlalchemy import Column, String, Table, insert

from examples.worker_split.tasks import Welcome, app_metadata, engine, scheduler, send_welcome

users = Table("users", app_metadata, Column("username", String(100), primary_key=True))


def sign_up(username: str) -> None:
    with engine.begin() as conn:
        conn.execute(insert(users).values(username=username))
        scheduler.schedule(conn, send_welcome.instance(f"welcome-{username}", Welcome(username)))


def main(usernames: list[str]) -> None:
    app_metadata.create_all(engine)
    for username in usernames:
        sign_up(username)
        print(f"signed up {username}; welcome scheduled")


if __name__ == "__main__":
    main(sys.argv[1:])
