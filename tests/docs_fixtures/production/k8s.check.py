"""After it: the container's command is one the worker's command line takes, with the pod's
name as the scheduler's name and the probes' port as its --health-port; the probes ask
/readyz and /livez there; and the grace period leaves room for the page's 25 s
``shutdown_max_wait``."""

from pathlib import Path

import yaml

from sqla_scheduler.cli import cli

spec = yaml.safe_load(Path("deployment.yaml").read_text())["spec"]
(container,) = spec["containers"]
program, *args = container["command"]
assert program == "sqla-scheduler", program
command, *rest = args
assert command == "worker", command
worker = cli.commands["worker"].make_context("worker", rest)
assert worker.params["name"] == "$(POD_NAME)"  # Kubernetes expands it from the env
(port,) = container["ports"]
assert worker.params["health_port"] == port["containerPort"]
assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": port["name"]}
(env,) = container["env"]
assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
assert spec["terminationGracePeriodSeconds"] > 25
