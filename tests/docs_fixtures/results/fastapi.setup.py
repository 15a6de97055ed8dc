"""Before the excerpt: the environment it reads."""

import os

os.environ["DATABASE_URL"] = "sqlite+aiosqlite:///app.db"
