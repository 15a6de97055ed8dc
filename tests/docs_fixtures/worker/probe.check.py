"""After it: the container's command, run as written (on the page's migrated SQLite
database and a free port in place of 8080), serves the probes the manifest asks for: both
answer 200, and the worker stops on SIGTERM."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

(container,) = yaml.safe_load(Path("worker.yaml").read_text())["containers"]
program, *args = container["command"]
assert program == "sqla-scheduler", program
(port,) = container["ports"]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
args = [str(free) if arg == str(port["containerPort"]) else arg for arg in args]
worker = subprocess.Popen(
    [sys.executable, "-m", "sqla_scheduler", *args],
    env={
        **os.environ,
        "DATABASE_URL": "sqlite:///app.db",
        # this directory's myapp, then the checkout under test (the test's PYTHONPATH)
        "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]]),
    },
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
)
try:
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == port["name"], get
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{free}{get['path']}") as reply:
                    assert reply.status == 200, (probe, reply.status)
                    break
            except OSError:
                assert worker.poll() is None, worker.communicate()[0]
                assert time.monotonic() < deadline, f"{probe}: no answer on {free}"
                time.sleep(0.05)
finally:
    worker.send_signal(signal.SIGTERM)
    output = worker.communicate(timeout=30)[0].decode()
assert worker.returncode == 0, output
