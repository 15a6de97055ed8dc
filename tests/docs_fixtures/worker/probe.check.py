"""After it: the container's command, run as written (on the page's migrated SQLite
database and a free port in place of 8080), serves the probes the manifest asks for: both
answer 200, and the worker stops on SIGTERM."""

import os
from pathlib import Path

import yaml

from tests.support.http import probed_worker
from tests.support.servers.base import free_port

(container,) = yaml.safe_load(Path("worker.yaml").read_text())["containers"]
program, *args = container["command"]
assert program == "sqla-scheduler", program
(port,) = container["ports"]
free = free_port()
probes = [container[probe]["httpGet"] for probe in ("readinessProbe", "livenessProbe")]
assert all(get["port"] == port["name"] for get in probes), probes
probed_worker(
    [str(free) if arg == str(port["containerPort"]) else arg for arg in args],
    free,
    [get["path"] for get in probes],
    {
        **os.environ,
        "DATABASE_URL": "sqlite:///app.db",
        # this directory's myapp, then the checkout under test (the test's PYTHONPATH)
        "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]]),
    },
)
