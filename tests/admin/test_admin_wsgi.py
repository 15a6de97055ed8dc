"""The admin page as a WSGI app (``create_wsgi_app``), mounted in a Flask application with
werkzeug's ``DispatcherMiddleware`` and served by werkzeug's own server on loopback: real
HTTP requests for its sign-in, its pages (links under the mount point), its stylesheet and
script, and an action's POST with its CSRF token."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from html import unescape

import httpx
import pytest
from flask import Flask
from sqlalchemy import create_engine, select
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import make_server

from sqla_scheduler.admin import create_wsgi_app
from sqla_scheduler.admin._security import CONTENT_SECURITY_POLICY
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.models import table_for
from tests.support.admin import PASSWORD, USER, make_scheduler, seed

MOUNT = "/admin/jobs"
HIDDEN = r'<input type="hidden" name="(\w+)" value="([^"]*)"'


@pytest.fixture
def served(pg_url: str) -> Iterator[tuple[str, datetime]]:
    """A Flask app with the admin page (actions on) mounted at ``MOUNT``, served by werkzeug
    in a thread; its base URL and the scheduler's clock's time."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    engine = create_engine(pg_url)
    seed(engine, now)
    scheduler = make_scheduler(engine, now)
    flask_app = Flask(__name__)

    @flask_app.get("/")
    def home() -> str:
        return "the shop"

    admin = create_wsgi_app(scheduler, username=USER, password=PASSWORD, actions=True)
    flask_app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        flask_app.wsgi_app, {MOUNT: admin}
    )
    server = make_server("127.0.0.1", 0, flask_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="wsgi-admin", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", now
    finally:
        server.shutdown()
        thread.join(timeout=10)
        engine.dispose()


def _form(html: str, action: str, instance: str) -> dict[str, str]:
    """The hidden fields of the ``action`` form of ``instance``'s row, as the page has them."""
    for form in re.findall(r'<form method="post".*?</form>', html, re.DOTALL):
        fields = {
            name: unescape(value)
            for name, value in re.findall(
                r'<input type="hidden" name="(\w+)" value="([^"]*)"', form
            )
        }
        if f'data-action="{action}"' in form and fields.get("instance") == instance:
            return fields
    raise AssertionError(f"no {action} form for {instance}")


def test_the_admin_page_served_by_a_wsgi_server(served: tuple[str, datetime], pg_url: str) -> None:
    base, now = served
    with httpx.Client(base_url=base, timeout=10) as anonymous:
        denied = anonymous.get(f"{MOUNT}/")
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"].startswith("Basic ")
        assert anonymous.get(f"{MOUNT}/", auth=(USER, "wrong")).status_code == 401
        # The Flask app around it is its own, and needs no password.
        assert anonymous.get("/").text == "the shop"

    with httpx.Client(base_url=base, auth=(USER, PASSWORD), timeout=10) as client:
        page = client.get(f"{MOUNT}/")
        assert page.status_code == 200, page.text
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "nightly-report" in page.text
        # Links follow the mount point (the WSGI SCRIPT_NAME).
        assert f'href="{MOUNT}/static/admin.css"' in page.text
        assert f'src="{MOUNT}/static/admin.js"' in page.text
        assert f'href="{MOUNT}/executions?state=failing"' in page.text
        for asset, kind in (("admin.css", "text/css"), ("admin.js", "text/javascript")):
            got = client.get(f"{MOUNT}/static/{asset}")
            assert got.status_code == 200
            assert got.headers["content-type"].startswith(kind)
        assert client.get(f"{MOUNT}/api/summary").json()["counts"]["failing"] == 3

        # An action: run now, with the page's CSRF token and version.
        listing = client.get(f"{MOUNT}/executions", params={"instance": "welcome-1"})
        fields = _form(listing.text, "run-now", "welcome-1")
        forged = client.post(f"{MOUNT}/actions/run-now", data={**fields, "csrf": "0" * 64})
        assert forged.status_code == 403
        done = client.post(f"{MOUNT}/actions/run-now", data=fields)
        assert done.status_code == 303, done.text
        assert done.headers["location"].startswith(f"{MOUNT}/executions?")
        assert done.headers["location"].endswith("done=run-now")
        back = client.get(done.headers["location"])
        assert "Done: the execution was rescheduled to now." in back.text

    table = table_for()
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            moved = conn.scalar(
                select(table.c.execution_time).where(table.c.task_instance == "welcome-1")
            )
    finally:
        engine.dispose()
    assert moved == now


def test_create_wsgi_app_checks_its_parameters_as_create_app_does(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        scheduler = make_scheduler(engine)
        with pytest.raises(ConfigurationError, match="no default password"):
            create_wsgi_app(scheduler)
        with pytest.raises(ConfigurationError, match="page_size must be 1 to"):
            create_wsgi_app(scheduler, password="x", page_size=0)
        with pytest.raises(TypeError, match="needs a Scheduler"):
            create_wsgi_app(object(), password="x")  # type: ignore[arg-type]
    finally:
        engine.dispose()
