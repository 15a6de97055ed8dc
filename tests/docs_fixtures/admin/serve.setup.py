"""Before ``serve``: the credentials in the environment, and a visitor that loads the page
once it is up, then interrupts the server as Ctrl-C would.

The page's port, 8080, may be taken on a test machine, so uvicorn is given a free one.
"""

import os
import signal
import socket
import threading
import time

import httpx
import uvicorn
from admin_page import AUTH, PASSWORD, assert_the_page

os.environ.pop("ADMIN_USER", None)  # the default user, admin
os.environ["ADMIN_PASSWORD"] = PASSWORD

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    free_port = probe.getsockname()[1]
uvicorn_run = uvicorn.run


def run_on_a_free_port(app, **options):
    assert (options["host"], options["port"]) == ("127.0.0.1", 8080), options
    uvicorn_run(app, **{**options, "port": free_port})


uvicorn.run = run_on_a_free_port

# uvicorn stops on SIGINT, then raises it again under the handler it found: record it
interrupted: list[int] = []
signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
visited: list[BaseException | None] = []


def visit() -> None:
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{free_port}") as client:
            deadline = time.monotonic() + 20
            while True:
                try:
                    root = client.get("/")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            assert root.headers["location"] == "/admin/jobs/", root.headers
            assert_the_page(client.get("/admin/jobs/"), client.get("/admin/jobs/", auth=AUTH))
        visited.append(None)
    except BaseException as exc:
        visited.append(exc)
    finally:
        os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=visit, daemon=True).start()
