"""After it: the container's command is one the worker's command line takes, with the pod's
name as the scheduler's name and the probes' port as its --health-port; the probes ask
/readyz and /livez there; the grace period leaves room for the page's 25 s
``shutdown_max_wait``; and the command, run on the page's SQLite database, answers both
probes and stops on SIGTERM."""

from pathlib import Path

import yaml

from sqla_scheduler.cli import cli

spec = yaml.safe_load(Path("deployment.yaml").read_text())["spec"]
(container,) = spec["containers"]
program, *args = container["command"]
assert program == "sqla-scheduler", program
command, *rest = args
assert command == "worker", command
worker = cli.commands["worker"].make_context("worker", list(rest))  # it eats its list
assert worker.params["name"] == "$(POD_NAME)"  # Kubernetes expands it from the env
(port,) = container["ports"]
assert worker.params["health_port"] == port["containerPort"]
assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": port["name"]}
(env,) = container["env"]
assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
assert spec["terminationGracePeriodSeconds"] > 25

# Run it: the command with the pod's name expanded and a free port for 8080, then the
# probes the manifest asks for, then SIGTERM, as Kubernetes would.
import os  # noqa: E402

from tests.support.http import probed_worker  # noqa: E402
from tests.support.servers.base import free_port  # noqa: E402

free = free_port()
argv = [
    "pod-7" if arg == "$(POD_NAME)" else str(free) if arg == str(port["containerPort"]) else arg
    for arg in rest
]
output = probed_worker(
    ["worker", *argv],
    free,
    [container[probe]["httpGet"]["path"] for probe in ("readinessProbe", "livenessProbe")],
    # this directory's myapp, then the checkout under test (the test's PYTHONPATH)
    {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]])},
)
assert "scheduler 'pod-7' started" in output, output
