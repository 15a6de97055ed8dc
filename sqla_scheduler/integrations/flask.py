"""Run a scheduler in a Flask application (``pip install sqla-scheduler[flask]``).

::

    from sqla_scheduler.integrations.flask import init_app

    app = Flask(__name__)
    scheduler = Scheduler(engine, tasks=[send_confirmation])
    init_app(app, scheduler)  # app.extensions["sqla_scheduler"] is the scheduler

The scheduler's loop runs on a background thread (``scheduler.start()``) in every process
that serves the application's requests, and in no other process. It starts when the
process serves its first request and stops when the process exits (``atexit``).

Why the first request. Flask creates the application, and so calls ``init_app``, in
processes that never serve it:

- ``flask run --debug``: the reloader's parent process loads the application, then runs
  the server in a child process (``WERKZEUG_RUN_MAIN=true``), and a new child after each
  change to the code;
- ``flask routes``, ``flask shell``, ``flask db upgrade`` and the application's own
  commands load it to run one command;
- ``gunicorn --preload`` creates it in the master process, which then forks the workers:
  a thread started before the fork does not survive in them.

Telling these apart at creation time means guessing from the environment
(``WERKZEUG_RUN_MAIN``, ``FLASK_RUN_FROM_CLI``, the click command being run, the name of
the server's module), a guess for each server that the next server or the next Flask
version breaks. Serving a request is the one thing that only a serving process does,
under every server (``flask run``, gunicorn, uWSGI, waitress, mod_wsgi). So ``init_app``
wraps ``app.wsgi_app``, which every request passes through before any of the
application's own hooks (a ``before_request`` function can end a request before the
next one runs), and the first request of each process starts that process's scheduler.

- ``flask run --debug``: one scheduler, in the child that serves; after a reload, the new
  child's first request starts its own (the old child stopped its loop on exit).
- gunicorn, uWSGI: one scheduler per worker process, each started by that worker's first
  request, after the fork, with or without ``--preload``; never in the master. Each is a
  node of the cluster (``scheduler.nodes()``), named by host and pid, sharing the table
  as any processes do.
- ``flask routes``, ``flask shell`` and other commands: none.

The cost is that a process runs no executions until it has served a request. In a
deployment the first health check is a request, within seconds of the start; where work
must run without any traffic, run the loop in a worker process (``sqla-scheduler
worker``) and use the scheduler in Flask only to schedule (no ``init_app``).

Stopping. ``scheduler.stop()`` is registered with ``atexit`` when the scheduler starts,
so a process that exits normally stops it gracefully (no new picks, running handlers get
``shutdown_max_wait``, what is still running is released): Ctrl-C, ``sys.exit``, the
reloader replacing its child, gunicorn stopping a worker. A process killed outright
(``SIGKILL``; or ``SIGTERM`` where nothing handles it, as under ``flask run`` without the
reloader) leaves its running executions to be revived by another scheduler once their
heartbeats are stale.

Not running it. With ``app.config["SQLA_SCHEDULER_RUN"] = False`` (read at each request
until the loop starts) requests start nothing: for tests that run executions themselves
(the pytest plugin's fixtures), or a web process that only schedules while workers run.

``init_app`` is idempotent: a second call with the same scheduler changes nothing, and a
scheduler shared by several applications (an application factory called twice) is
started once per process. If the scheduler is already running (started by the
application itself), the first request leaves it as it is.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqla_scheduler._extras import missing_extra

try:
    from flask import Flask
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra(__name__, "Flask", "flask") from exc

from sqla_scheduler.scheduler import Scheduler

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["EXTENSION_KEY", "RUN_CONFIG_KEY", "init_app"]

#: The key of ``app.extensions`` that holds the application's scheduler.
EXTENSION_KEY = "sqla_scheduler"
#: The configuration key that, set to ``False``, keeps requests from starting the loop.
RUN_CONFIG_KEY = "SQLA_SCHEDULER_RUN"


def init_app(app: Flask, scheduler: Scheduler, *, backend: str = "asyncio") -> None:
    """Run ``scheduler`` in the processes that serve ``app``, from their first request.

    Stores the scheduler in ``app.extensions["sqla_scheduler"]``. ``backend`` is the event
    loop the background thread runs (``"trio"`` for trio, with a sync engine). Calling it
    again with the same scheduler does nothing; with another one, it raises
    ``RuntimeError``: an application runs one scheduler.
    """
    existing = app.extensions.get(EXTENSION_KEY)
    if existing is scheduler:
        return
    if existing is not None:
        raise RuntimeError(f"{app!r} already runs {existing!r}; an application runs one")
    app.extensions[EXTENSION_KEY] = scheduler
    starter = _starter(scheduler, backend)
    app.wsgi_app = _StartOnFirstRequest(app, starter)  # type: ignore[method-assign]


class _Starter:
    """Starts one scheduler once in this process, and stops it at exit."""

    def __init__(self, scheduler: Scheduler, backend: str) -> None:
        self.scheduler = scheduler
        self.backend = backend
        self.started = threading.Event()
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        if self.started.is_set():  # every request after the first
            return
        with self._lock:
            if self.started.is_set():
                return
            if not self.scheduler.running:
                # A failure (the table missing, the database down) fails this request and
                # the next request tries again: the application is visibly broken, not
                # silently running without its scheduler.
                self.scheduler.start(backend=self.backend)
                atexit.register(self.scheduler.stop)
            self.started.set()


_starters: weakref.WeakKeyDictionary[Scheduler, _Starter] = weakref.WeakKeyDictionary()
_starters_lock = threading.Lock()


def _starter(scheduler: Scheduler, backend: str) -> _Starter:
    """The one starter of ``scheduler``, shared by every application that runs it."""
    with _starters_lock:
        starter = _starters.get(scheduler)
        if starter is None:
            starter = _starters[scheduler] = _Starter(scheduler, backend)
        return starter


class _StartOnFirstRequest:
    """WSGI middleware: makes sure the scheduler runs, then serves the request."""

    def __init__(self, flask_app: Flask, starter: _Starter) -> None:
        self.app: WSGIApplication = flask_app.wsgi_app
        self.config = flask_app.config
        self.starter = starter

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not self.starter.started.is_set() and self.config.get(RUN_CONFIG_KEY, True):
            self.starter.ensure_started()
        return self.app(environ, start_response)
