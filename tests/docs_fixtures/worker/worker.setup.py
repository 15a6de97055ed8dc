"""Before the web side's lines: the database its module reads, the application's users
table, and the request's user name."""

import os

from sqlalchemy import Column, MetaData, String, Table, create_engine, insert

os.environ["DATABASE_URL"] = "sqlite:///app.db"
users = Table("users", MetaData(), Column("username", String(100), primary_key=True))
users.metadata.create_all(create_engine(os.environ["DATABASE_URL"]))
username = "ada"
