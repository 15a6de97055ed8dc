"""HTTP probes for a worker process: what ``sqla-scheduler worker --health-port PORT`` serves.

- ``GET /livez``: the worker is making progress. Its event loop ticks once a second and
  has done so within ``LIVE_WITHIN``, and it has not owed work of its own (an outcome to
  commit, an execution to start with a worker free) for ``STALLED_AFTER`` without starting
  or recording anything: an event loop that ticks is not progress. It never asks the
  database: a worker whose database is down, or whose schema a newer version upgraded,
  keeps running and retrying (the database's refusals count as progress), and a restart
  would not help it, so liveness holds. 200 or 503, with one line of text.
- ``GET /readyz``: the database answers and its schema is one this version runs on (at
  the head, or ahead of it), as ``sqla-scheduler health`` checks it. 200 or 503.
- ``GET /metrics``: the Prometheus text of the process's default registry, where
  ``prometheus-client`` is installed (the ``prometheus`` extra); 404 saying so otherwise.

The server is the standard library's WSGI server (``wsgiref``) in daemon threads beside
the worker's event loop: a probe answers while handlers run, and a blocked event loop
shows as a liveness that stops ticking. It is safe on a pod's network: one thread waits
for connections to have something to read (``selectors``: an idle connection costs a
socket, not a thread), at most ``MAX_OPEN`` are kept (a new one closes the longest idle),
an idle one is closed after ``IDLE_TIMEOUT``, and ``HANDLERS`` threads answer requests,
each read with ``READ_TIMEOUT``. Answers name no host, port, database or user: the
details of a failed readiness check go to the log.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import anyio
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from sqla_scheduler._dialects import tool_engine
from sqla_scheduler.models import DEFAULT_TABLE_NAME

__all__ = ["LIVE_WITHIN", "Probes"]

log = logging.getLogger("sqla_scheduler")

#: How recently the event loop must have ticked for ``/livez`` to pass.
LIVE_WITHIN = timedelta(seconds=30)
#: How long a worker may owe work of its own without progress before ``/livez`` fails.
STALLED_AFTER = timedelta(minutes=5)
_TICK = 1.0

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


#: Threads that answer requests.
HANDLERS = 4
#: Connections kept open at most; a new one closes the one idle longest.
MAX_OPEN = 256
#: How long a connection may stay open with nothing read from it.
IDLE_TIMEOUT = 10.0
#: How long reading a request that has begun to arrive may take.
READ_TIMEOUT = 5.0


class _Server(WSGIServer):
    """The WSGI server, served by ``_Serving`` instead of ``serve_forever``."""

    request_queue_size = 1024  # the listen backlog: a burst of connections waits there

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("probe: a request from %s failed", client_address, exc_info=True)


class _Serving:
    """Accepts connections, waits for them to be readable, hands them to the handlers."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self._selector = selectors.DefaultSelector()
        self._open: dict[socket.socket, float] = {}  # connection -> when it was accepted
        self._ready: queue.SimpleQueue[socket.socket | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._waker_r, self._waker_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.server.socket.setblocking(False)
        self._selector.register(self.server.socket, selectors.EVENT_READ, "accept")
        self._selector.register(self._waker_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(
            target=self._serve, name="sqla-scheduler-probes", daemon=True
        )
        self._thread.start()
        for n in range(HANDLERS):
            threading.Thread(
                target=self._handle, name=f"sqla-scheduler-probe-{n}", daemon=True
            ).start()

    def stop(self) -> None:
        """Stop serving and close every connection kept (waiting a moment for that)."""
        self._stop.set()
        self._waker_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for _ in range(HANDLERS):  # after what the serving thread queued: it is answered
            self._ready.put(None)

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                for key, _events in self._selector.select(timeout=1.0):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "conn":
                        conn = key.fileobj
                        assert isinstance(conn, socket.socket)
                        self._selector.unregister(conn)
                        del self._open[conn]
                        self._ready.put(conn)
                self._close_idle()
        finally:
            for conn in list(self._open):
                self._drop(conn)
            self._selector.close()
            self._waker_r.close()
            self._waker_w.close()

    def _accept(self) -> None:
        try:
            conn, _address = self.server.socket.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            log.debug("probe: accept failed", exc_info=True)
            return
        if len(self._open) >= MAX_OPEN:  # the one idle longest makes room
            self._drop(min(self._open, key=self._open.__getitem__))
        conn.setblocking(True)
        self._open[conn] = time.monotonic()
        self._selector.register(conn, selectors.EVENT_READ, "conn")

    def _close_idle(self) -> None:
        now = time.monotonic()
        for conn, since in list(self._open.items()):
            if now - since > IDLE_TIMEOUT:
                self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._open.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()

    def _handle(self) -> None:
        while True:
            conn = self._ready.get()
            if conn is None:
                return
            try:
                conn.settimeout(READ_TIMEOUT)
                self.server.finish_request(conn, conn.getpeername())
            except Exception:
                self.server.handle_error(conn, None)
            finally:
                self.server.shutdown_request(conn)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("probe: %s", format % args)


class Probes:
    """``/livez``, ``/readyz`` and ``/metrics`` on ``host:port`` for one worker.

    ``start`` serves in a daemon thread (port 0 takes a free one: ``port`` says which);
    ``tick`` runs in the worker's task group; ``stop`` closes the server.
    """

    def __init__(
        self,
        url: Any,
        *,
        port: int,
        host: str = "0.0.0.0",
        table_name: str = DEFAULT_TABLE_NAME,
        schema: str | None = None,
        stalled: Callable[[], float] | None = None,
        stalled_after: timedelta = STALLED_AFTER,
    ) -> None:
        self._url = url
        #: How long the worker has owed work without progress (read by ``tick``).
        self._stalled_for = stalled
        self._stalled_after = stalled_after.total_seconds()
        self._stalled = 0.0
        self._table_name = table_name
        self._schema = schema
        self._host = host
        self._port = port
        self._last_tick = time.monotonic()
        self._server: _Server | None = None
        self._serving: _Serving | None = None
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()

    @property
    def port(self) -> int:
        """The port served on (once started)."""
        return self._server.server_port if self._server is not None else self._port

    def start(self) -> None:
        """Serve in a daemon thread until ``stop``."""
        self._server = make_server(
            self._host, self._port, self._app, server_class=_Server, handler_class=_QuietHandler
        )
        self._serving = _Serving(self._server)
        self._serving.start()
        # each readiness check looks the schema up through Alembic, which logs a line per
        # step it reads at INFO: quiet in a worker, which runs no migration of its own
        alembic_log = logging.getLogger("alembic.runtime.migration")
        if alembic_log.level == logging.NOTSET:
            alembic_log.setLevel(logging.WARNING)
        log.info("probes on http://%s:%d: /livez, /readyz, /metrics", self._host, self.port)

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.stop()
        if self._server is not None:
            self._server.server_close()
        if self._engine is not None:
            self._engine.dispose()

    async def tick(self) -> None:
        """Note every second that the event loop runs, and how long the worker has
        stalled (read here, in the loop that owns its state), until cancelled."""
        while True:
            self._last_tick = time.monotonic()
            if self._stalled_for is not None:
                self._stalled = self._stalled_for()
            await anyio.sleep(_TICK)

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _reply(start_response, 405, "only GET\n")
        if path == "/livez":
            return self._livez(start_response)
        if path == "/readyz":
            return self._readyz(start_response)
        if path == "/metrics":
            return _metrics(start_response)
        return _reply(start_response, 404, "not found: /livez, /readyz or /metrics\n")

    def _livez(self, start_response: StartResponse) -> Iterable[bytes]:
        ago = time.monotonic() - self._last_tick
        stalled = self._stalled
        if ago <= LIVE_WITHIN.total_seconds() and stalled > self._stalled_after:
            return _reply(
                start_response,
                503,
                f"not live: work owed for {stalled:.0f}s with nothing started or recorded "
                "(outcomes waiting to be committed, or executions to start with a worker "
                "free)\n",
            )
        if ago <= LIVE_WITHIN.total_seconds():
            return _reply(start_response, 200, f"live: the event loop ticked {ago:.1f}s ago\n")
        return _reply(
            start_response,
            503,
            f"not live: the event loop last ticked {ago:.0f}s ago (blocked by a handler "
            "that does not await?)\n",
        )

    def _readyz(self, start_response: StartResponse) -> Iterable[bytes]:
        from sqla_scheduler.health import check

        try:
            found = check(self._checking_engine(), table_name=self._table_name, schema=self._schema)
        except Exception as exc:  # unreachable, no table: not ready, the details to the log
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("readiness: %s: %s", type(exc).__name__, first)
            return _reply(start_response, 503, f"not ready: {_kind_of(exc)} (see the log)\n")
        return _reply(start_response, 200 if found.healthy else 503, found.reason + "\n")

    def _checking_engine(self) -> Engine:
        with self._engine_lock:
            if self._engine is None:
                # its own small pool, checked before use: the database may have restarted
                self._engine = tool_engine(
                    self._url, pool_size=1, max_overflow=1, pool_pre_ping=True
                )
            return self._engine


def _kind_of(error: Exception) -> str:
    """What went wrong, in words that name no host, port, database or user."""
    from sqla_scheduler.exceptions import MissingTableError

    if isinstance(error, MissingTableError):
        return "the scheduler's table is missing (run the migrations)"
    if isinstance(error, DBAPIError):
        return "the database did not answer"
    return f"the check failed ({type(error).__name__})"


def _metrics(start_response: StartResponse) -> Iterable[bytes]:
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
    except ImportError:
        return _reply(start_response, 404, "no metrics: pip install 'sqla-scheduler[prometheus]'\n")
    body = generate_latest(REGISTRY)
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
    return [body]


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _reply(start_response: StartResponse, status: int, text: str) -> Iterable[bytes]:
    body = text.encode()
    start_response(
        f"{status} {_REASONS[status]}",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]
