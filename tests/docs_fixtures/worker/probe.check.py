"""After it: both probes run ``sqla-scheduler health``, which passes on the page's migrated
database (``DATABASE_URL``, as the container's env sets it) and fails where there is no
table."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

(container,) = yaml.safe_load(Path("worker.yaml").read_text())["containers"]
assert container["env"][0]["name"] == "DATABASE_URL"
for probe in ("readinessProbe", "livenessProbe"):
    program, *args = container[probe]["exec"]["command"]
    assert program == "sqla-scheduler", program
    command = [sys.executable, "-m", "sqla_scheduler", *args]
    for url, status in (("sqlite:///app.db", 0), ("sqlite:///not-migrated.db", 1)):
        done = subprocess.run(
            command,
            env={**os.environ, "DATABASE_URL": url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == status, (probe, url, done.stdout, done.stderr)
