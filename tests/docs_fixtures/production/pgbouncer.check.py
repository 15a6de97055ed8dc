"""After it: the config keeps the direct URL for LISTEN alone and prepares nothing, and the
engine reaches the pooler without preparing either (nothing connects here)."""

assert config.listen_url == "postgresql+psycopg://app@db-primary:5432/app"
assert config.prepared_statements is False
assert engine.url.port == 6432
assert "db-primary" not in repr(config)  # the URL may hold a password: not in the repr
