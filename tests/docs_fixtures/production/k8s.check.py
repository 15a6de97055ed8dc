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
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
argv = [
    "pod-7" if arg == "$(POD_NAME)" else str(free) if arg == str(port["containerPort"]) else arg
    for arg in rest
]
worker_process = subprocess.Popen(
    [sys.executable, "-m", "sqla_scheduler", "worker", *argv],
    # this directory's myapp, then the checkout under test (the test's PYTHONPATH)
    env={**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]])},
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
)
try:
    for probe in ("readinessProbe", "livenessProbe"):
        path = container[probe]["httpGet"]["path"]
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{free}{path}") as reply:
                    assert reply.status == 200, (probe, reply.status)
                    break
            except OSError:
                assert worker_process.poll() is None, worker_process.communicate()[0]
                assert time.monotonic() < deadline, f"{probe}: no answer on {free}"
                time.sleep(0.05)
finally:
    worker_process.send_signal(signal.SIGTERM)
    output = worker_process.communicate(timeout=30)[0].decode()
assert worker_process.returncode == 0, output
assert "scheduler 'pod-7' started" in output, output
