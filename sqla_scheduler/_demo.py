"""``sqla-scheduler demo``: a small shop running on the scheduler, watched live.

Every ~0.8 seconds an order is placed, and in the same transaction a confirmation email and
a card charge are scheduled; every fifth order fails its stock check and rolls back,
taking both with it. A cron task sweeps idle carts every three seconds. The card charge
talks to a fake payment gateway whose test cards behave in fixed ways (a timeout or two,
or a decline), so every run tells the same story: retries with backoff, successes after
retries, and one charge per five orders abandoned into a dead-letter table by its
``on_abandon`` hook. A charge that goes through schedules a shipment poll, a custom task
that reschedules itself until the parcel is delivered.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import anyio.to_thread
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text
from sqlalchemy import JSON, DateTime, Engine, Integer, String, create_engine, func, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_scheduler import migrate
from sqla_scheduler._dialects import sync_url
from sqla_scheduler._durations import format_duration
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.executions import Execution
from sqla_scheduler.listeners import SchedulerListener
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.schedules import Cron
from sqla_scheduler.tasks import NextAt, custom, one_time, recurring

__all__ = ["AdminPortError", "DemoError", "run"]

#: Seconds between two orders.
ORDER_EVERY = 0.8
#: Every this many orders, one fails its stock check and rolls back.
ROLLBACK_EVERY = 5
#: How often the live view is redrawn, and the plain view's status line printed.
REFRESH_EVERY = 0.25
PLAIN_STATUS_EVERY = 1.0

CONFIG = SchedulerConfig(
    concurrency=4,
    polling_interval=timedelta(milliseconds=200),
    heartbeat_interval=timedelta(seconds=1),
    retry_base_delay=timedelta(seconds=1),
    retry_backoff_rate=1.5,
    retry_max_delay=timedelta(seconds=5),
    shutdown_max_wait=timedelta(seconds=3),
    scheduler_name="demo",
)

log = logging.getLogger("sqla_scheduler")


def tuned_settings() -> str:
    """The settings the demo changes from the defaults, so that its story fits in seconds."""
    defaults = SchedulerConfig()
    changed = [
        f"{field.name} {_shown(value)} (default {_shown(getattr(defaults, field.name))})"
        for field in dataclasses.fields(CONFIG)
        if field.name != "scheduler_name"
        and (value := getattr(CONFIG, field.name)) != getattr(defaults, field.name)
    ]
    return "tuned for a short demo: " + ", ".join(changed)


def _shown(value: object) -> str:
    return format_duration(value) if isinstance(value, timedelta) else str(value)


class DemoError(Exception):
    """The demo saw something the scheduler promises never happens."""


class AdminPortError(Exception):
    """The admin page cannot listen on the port it was given."""


# --- the shop's tables --------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class Order(Base):
    # demo_ prefixed: pointed at a real database, the demo must not touch an app's `orders`.
    __tablename__ = "demo_orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    customer: Mapped[str] = mapped_column(String(100))
    total_cents: Mapped[int] = mapped_column(Integer)
    card: Mapped[str] = mapped_column(String(40))
    placed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DeadLetter(Base):
    __tablename__ = "demo_dead_letters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_name: Mapped[str] = mapped_column(String(100))
    instance_id: Mapped[str] = mapped_column(String(255))
    order_id: Mapped[int] = mapped_column(Integer)
    payload: Mapped[Any] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(String(200))
    failed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


# --- a fake payment gateway ----------------------------------------------------------------


class PaymentError(Exception):
    """The gateway refused a charge."""


# Like a payment provider's test cards: each behaves the same way every time. The value is
# (how many attempts time out first, whether the card is declined).
CARDS: dict[str, tuple[int, bool]] = {
    "4000 0000 0000 0002": (0, True),  # declined, every time
    "4000 0000 0000 0119": (2, False),  # two timeouts, then it goes through
    "4242 4242 4242 4242": (0, False),  # goes through
    "4000 0000 0000 0341": (1, False),  # one timeout, then it goes through
}
CUSTOMERS = ("ada@example.com", "grace@example.com", "alan@example.com", "edsger@example.com")
SHIPMENT_STEPS = ("label created", "in transit", "out for delivery", "delivered")


def charge(card: str, attempt: int) -> None:
    """Charge ``card``; raise ``PaymentError`` as the card's behaviour says."""
    timeouts, declined = CARDS[card]
    time.sleep(0.15)  # the gateway's round trip
    if declined:
        raise PaymentError("card declined")
    if attempt <= timeouts:
        raise PaymentError("gateway timeout")


# --- the shop --------------------------------------------------------------------------------


@dataclass
class Event:
    at: float
    task: str
    instance: str
    text: str
    style: str = ""


@dataclass
class Stats:
    """What happened, as the shop and the listener saw it. Guarded by ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)
    events: deque[Event] = field(default_factory=lambda: deque(maxlen=200))
    event_count: int = 0
    #: How many events the plain view has printed.
    printed: int = 0
    placed: list[int] = field(default_factory=list)
    rolled_back: list[int] = field(default_factory=list)
    confirmed: set[int] = field(default_factory=set)
    succeeded: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    abandoned: Counter[str] = field(default_factory=Counter)
    delivered: int = 0
    #: The latest error of each failing (task, instance).
    last_error: dict[tuple[str, str], str] = field(default_factory=dict)
    warnings: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def add(self, task: str, instance: str, text: str, style: str = "") -> None:
        with self.lock:
            self.events.append(Event(self.elapsed(), task, instance, text, style))
            self.event_count += 1

    def since(self, seen: int) -> tuple[list[Event], int]:
        """Events after the first ``seen`` (as many as are still kept), and how many in all."""
        with self.lock:
            new = min(self.event_count - seen, len(self.events))
            return (list(self.events)[-new:] if new > 0 else []), self.event_count


class Shop:
    """The demo application: its tasks, its scheduler, and the order desk."""

    def __init__(self, engine: Engine, stats: Stats) -> None:
        self.engine = engine
        self.stats = stats

        @one_time("send-confirmation", max_retries=3)
        def send_confirmation(ctx: ExecutionContext[dict[str, Any]]) -> None:
            time.sleep(0.3)  # talking to the mail server
            with stats.lock:
                stats.confirmed.add(ctx.payload["order_id"])

        @one_time("charge-card", max_retries=2, on_abandon=self._dead_letter)
        def charge_card(ctx: ExecutionContext[dict[str, Any]]) -> None:
            charge(ctx.payload["card"], attempt=ctx.consecutive_failures + 1)
            order_id = ctx.payload["order_id"]
            # Committed with this charge's success: no charge, no shipment to track.
            ctx.schedule(
                poll_shipment.instance(
                    f"order-{order_id}",
                    {"order_id": order_id, "step": 0},
                    at=datetime.now(timezone.utc) + timedelta(seconds=1),
                )
            )

        @custom("poll-shipment")
        def poll_shipment(ctx: ExecutionContext[dict[str, Any]]) -> NextAt[Any] | None:
            step = ctx.payload["step"] + 1
            if SHIPMENT_STEPS[step] == "delivered":
                with stats.lock:
                    stats.delivered += 1
                return None
            return NextAt(
                datetime.now(timezone.utc) + timedelta(seconds=1), {**ctx.payload, "step": step}
            )

        @recurring("sweep-carts", Cron("*/3 * * * * ?"), initial_payload={"sweeps": 0})
        def sweep_carts(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
            time.sleep(0.1)
            # What a recurring task returns is the payload of its next run.
            return {"sweeps": ctx.payload["sweeps"] + 1}

        self.send_confirmation = send_confirmation
        self.charge_card = charge_card
        tasks = [send_confirmation, charge_card, poll_shipment, sweep_carts]
        watcher = Watcher(stats, CONFIG)
        watcher.max_retries = {task.name: task.max_retries for task in tasks}
        self.scheduler = Scheduler(engine, tasks=tasks, config=CONFIG, listeners=[watcher])
        with Session(engine) as session:
            last = session.scalar(select(func.max(Order.id)))
        self.numbers = itertools.count((last or 0) + 1)
        self.first_order = (last or 0) + 1

    def _dead_letter(self, ctx: ExecutionContext[dict[str, Any]], session: Session) -> None:
        """``on_abandon``: commits with the removal of the execution, or neither does."""
        with self.stats.lock:
            error = self.stats.last_error.get((ctx.task_name, ctx.instance_id), "failed")
        session.add(
            DeadLetter(
                task_name=ctx.task_name,
                instance_id=ctx.instance_id,
                order_id=ctx.payload["order_id"],
                payload=ctx.payload,
                reason=f"{error} after {ctx.consecutive_failures + 1} attempts",
                failed_at=datetime.now(timezone.utc),
            )
        )

    def place_order(self, index: int) -> None:
        """Place order number ``index`` of this run (1-based); every fifth one rolls back."""
        order_id = next(self.numbers)
        customer = CUSTOMERS[index % len(CUSTOMERS)]
        card = list(CARDS)[(index - 1) % len(CARDS)]
        total = 1000 + 137 * index
        instance = f"order-{order_id}"
        out_of_stock = index % ROLLBACK_EVERY == 0
        try:
            with Session(self.engine) as session, session.begin():
                session.add(
                    Order(
                        id=order_id,
                        customer=customer,
                        total_cents=total,
                        card=card,
                        placed_at=datetime.now(timezone.utc),
                    )
                )
                # The confirmation and the charge join the order's transaction: they exist
                # if and only if the order commits.
                self.scheduler.schedule(
                    session,
                    self.send_confirmation.instance(
                        instance, {"order_id": order_id, "customer": customer}
                    ),
                )
                self.scheduler.schedule(
                    session,
                    self.charge_card.instance(
                        instance, {"order_id": order_id, "card": card, "total_cents": total}
                    ),
                )
                if out_of_stock:
                    raise _OutOfStock
        except _OutOfStock:
            with self.stats.lock:
                self.stats.rolled_back.append(order_id)
            self.stats.add(
                "shop",
                instance,
                "order rolled back (out of stock): its confirmation and charge went with it",
                "yellow",
            )
            return
        with self.stats.lock:
            self.stats.placed.append(order_id)
        self.stats.add(
            "shop", instance, f"order placed by {customer}, ${total / 100:.2f}, card …{card[-4:]}"
        )

    def check_rolled_back(self) -> list[str]:
        """What the scheduler promises about rolled-back orders, checked; the broken ones."""
        broken = []
        with Session(self.engine) as session:
            for order_id in self.stats.rolled_back:
                instance = f"order-{order_id}"
                if session.get(Order, order_id) is not None:
                    broken.append(f"order {order_id} rolled back but its row exists")
                for task in ("send-confirmation", "charge-card"):
                    if self.scheduler.get_execution(session, task, instance) is not None:
                        broken.append(f"order {order_id} rolled back but {task} is scheduled")
                if order_id in self.stats.confirmed:
                    broken.append(f"order {order_id} rolled back but its confirmation was sent")
        return broken

    def dead_letters(self) -> list[DeadLetter]:
        with Session(self.engine) as session:
            query = select(DeadLetter).where(DeadLetter.order_id >= self.first_order)
            return list(session.scalars(query.order_by(DeadLetter.id)))


class _OutOfStock(Exception):
    pass


class Watcher(SchedulerListener):
    """Turns the scheduler's hooks into the demo's counters and events."""

    def __init__(self, stats: Stats, config: SchedulerConfig) -> None:
        self.stats = stats
        self.config = config
        #: Each task's max_retries, filled in once the scheduler exists.
        self.max_retries: dict[str, int | None] = {}

    def on_success(self, context: ExecutionContext[Any], duration: timedelta) -> None:
        with self.stats.lock:
            self.stats.succeeded[context.task_name] += 1
        payload = context.payload
        text = {
            "send-confirmation": lambda: f"confirmation sent to {payload['customer']}",
            "charge-card": lambda: (
                "charged"
                + (
                    f" after {_plural(context.consecutive_failures, 'retry', 'retries')}"
                    if context.consecutive_failures
                    else ""
                )
                + "; shipment poll scheduled"
            ),
            "poll-shipment": lambda: f"parcel {SHIPMENT_STEPS[payload['step'] + 1]}",
            "sweep-carts": lambda: f"idle carts swept (sweep #{payload['sweeps'] + 1})",
        }.get(context.task_name, lambda: "succeeded")()
        self.stats.add(context.task_name, context.instance_id, text, "green")

    def on_failure(
        self, context: ExecutionContext[Any], error: BaseException, duration: timedelta
    ) -> None:
        failures = context.consecutive_failures + 1
        limit = self.max_retries.get(context.task_name, self.config.max_retries)
        with self.stats.lock:
            self.stats.last_error[context.task_name, context.instance_id] = str(error)
            if limit is None or failures <= limit:
                self.stats.retried[context.task_name] += 1
        if limit is not None and failures > limit:
            text = f"failed ({error}): out of retries"
        else:
            delay = self.config.retry_delay(failures).total_seconds()
            text = f"failed ({error}); retry {failures} of {limit or '∞'} in {delay:g}s"
        self.stats.add(context.task_name, context.instance_id, text, "red")

    def on_abandon(self, context: ExecutionContext[Any], error: BaseException | None) -> None:
        with self.stats.lock:
            self.stats.abandoned[context.task_name] += 1
        self.stats.add(
            context.task_name, context.instance_id, "abandoned: written to dead letters", "bold red"
        )

    def on_dead_execution(self, execution: Execution) -> None:
        self.stats.add(
            execution.task_name, execution.instance_id, "revived (stale heartbeat)", "magenta"
        )


@contextmanager
def _scheduler_log_as_events(stats: Stats) -> Iterator[None]:
    """Show the scheduler's unexpected warnings as events, one line each.

    Failures of the demo's own tasks are expected and shown by the listener already; their
    log records (with tracebacks) are dropped.
    """

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            error = record.exc_info[1] if record.exc_info else None
            if isinstance(error, PaymentError) or str(record.msg).startswith("abandoned "):
                return
            with stats.lock:
                stats.warnings += 1
            stats.add("log", record.levelname.lower(), record.getMessage(), "bold red")

    handler = Handler(logging.WARNING)
    propagate = log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


# --- the views -------------------------------------------------------------------------


@dataclass
class Snapshot:
    due: int = 0
    running: int = 0
    failing: int = 0
    scheduled: int = 0


def _snapshot(scheduler: Scheduler, engine: Engine) -> Snapshot:
    now = datetime.now(timezone.utc)
    counts = Counter(e.status(now) for e in scheduler.executions(engine))
    return Snapshot(
        due=counts["due"],
        running=counts["running"],
        failing=counts["failing"],
        scheduled=counts["scheduled"],
    )


def _status_line(stats: Stats, snap: Snapshot) -> str:
    with stats.lock:
        return (
            f"[{stats.elapsed():5.1f}s] due {snap.due} · running {snap.running} · "
            f"failing {snap.failing} · succeeded {sum(stats.succeeded.values())} · "
            f"abandoned {sum(stats.abandoned.values())} · orders placed {len(stats.placed)}, "
            f"rolled back {len(stats.rolled_back)}"
        )


def _event_line(event: Event) -> str:
    return f"[{event.at:5.1f}s] {event.task} {event.instance}: {event.text}"


def _live_view(
    stats: Stats, snap: Snapshot, duration: float | None, width: int, height: int
) -> RenderableType:
    with stats.lock:
        elapsed = stats.elapsed()
        counts = Table.grid(padding=(0, 2))
        for _ in range(4):
            counts.add_column(justify="right")
        rows = [
            ("due", snap.due, "orders placed", len(stats.placed)),
            ("running", snap.running, "rolled back", len(stats.rolled_back)),
            ("failing", snap.failing, "confirmations sent", stats.succeeded["send-confirmation"]),
            ("succeeded", sum(stats.succeeded.values()), "charges", stats.succeeded["charge-card"]),
            (
                "abandoned",
                sum(stats.abandoned.values()),
                "dead letters",
                stats.abandoned["charge-card"],
            ),
        ]
        styles = {"failing": "red", "succeeded": "green", "abandoned": "bold red"}
        for label, count, shop_label, shop_count in rows:
            counts.add_row(
                Text(label, style=styles.get(label, "")), str(count), shop_label, str(shop_count)
            )
        recent = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for header in ("time", "task", "instance", "what happened"):
            recent.add_column(header, justify="right" if header == "time" else "left")
        # One line per event: cut the text to what the other columns leave of the width.
        room = max(20, width - 42)
        # As many of the latest events as the terminal has room for.
        for event in list(stats.events)[-max(3, height - len(rows) - 6) :]:
            text = event.text if len(event.text) <= room else event.text[: room - 1] + "…"
            recent.add_row(f"{event.at:.1f}s", event.task, event.instance, Text(text, event.style))
    until = f"{elapsed:.0f}s of {duration:g}s" if duration is not None else f"{elapsed:.0f}s"
    title = Text.assemble(("sqla-scheduler demo", "bold"), f" · {until} · Ctrl-C to stop")
    return Group(title, Text(""), counts, Text(""), recent)


# --- running it ------------------------------------------------------------------------------


def _database(database_url: str | None) -> tuple[str | URL, str]:
    """The URL to run on, and how to say where that is."""
    if database_url is not None:
        url = sync_url(database_url)
        return url, url.render_as_string(hide_password=True)
    path = os.path.join(tempfile.mkdtemp(prefix="sqla-scheduler-demo-"), "demo.db")
    return f"sqlite:///{path}", f"sqlite:///{path}"


def run(
    database_url: str | None = None,
    duration: float | None = None,
    *,
    console: Console | None = None,
    admin_port: int | None = None,
) -> None:
    """Run the demo until ``duration`` seconds have passed (or SIGINT/SIGTERM), then sum up.

    ``database_url`` defaults to a new SQLite file in a temporary directory. The view is
    live on a terminal and plain lines otherwise. With ``admin_port`` (0: any free port),
    the admin page is served on 127.0.0.1 while the demo runs, actions on, and where to
    open it and how to sign in is printed first. Raises ``DemoError`` if a rolled-back
    order left anything behind.
    """
    console = console or Console()
    url, where = _database(database_url)
    console.print(f"database: {where}", highlight=False, soft_wrap=True)
    console.print(tuned_settings(), highlight=False, soft_wrap=True)
    migrate.upgrade(url)
    engine = create_engine(url)
    try:
        Base.metadata.create_all(engine)
        stats = Stats()
        shop = Shop(engine, stats)
        with _admin_page(shop.scheduler, admin_port, console), _scheduler_log_as_events(stats):
            # KeyboardInterrupt: where signals cannot be received (Windows), Ctrl-C ends it.
            with suppress(KeyboardInterrupt):
                anyio.run(_main, shop, console, duration)
            dead = shop.dead_letters()
            broken = shop.check_rolled_back()
        console.print()
        console.print(_summary(stats, dead, where), highlight=False, soft_wrap=True)
        if broken:
            raise DemoError("; ".join(broken))
    finally:
        engine.dispose()


@contextmanager
def _admin_page(scheduler: Scheduler, port: int | None, console: Console) -> Iterator[None]:
    """The admin page of ``scheduler`` served on 127.0.0.1:``port`` (0: a free one) by
    uvicorn in a thread, while the block runs; nothing when ``port`` is None."""
    if port is None:
        yield
        return
    import socket

    import uvicorn

    from sqla_scheduler.admin import create_app

    # ADMIN_PASSWORD when set, else one for this run alone, printed once below.
    username = os.environ.get("ADMIN_USER") or "admin"
    password = os.environ.get("ADMIN_PASSWORD") or secrets.token_urlsafe(12)
    app = create_app(scheduler, username=username, password=password, actions=True)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", port))
        # Listening before the address is printed: a browser (or a test) that connects at
        # once waits in the backlog until uvicorn accepts, instead of being refused.
        listening.listen(128)
    except OSError as exc:
        listening.close()
        raise AdminPortError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    host, bound = listening.getsockname()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            proxy_headers=False,
            server_header=False,
        )
    )
    # In a thread: uvicorn then leaves the signals to the demo, which stops on them.
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listening]}, name="demo-admin", daemon=True
    )
    thread.start()
    said = (
        "the password in ADMIN_PASSWORD"
        if os.environ.get("ADMIN_PASSWORD")
        else f"password {password}"
    )
    console.print(
        f"admin page: http://{host}:{bound}/ (user {username}, {said})",
        highlight=False,
        soft_wrap=True,
    )
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()


async def _main(shop: Shop, console: Console, duration: float | None) -> None:
    stats = shop.stats
    live = console.is_terminal
    async with shop.scheduler:
        stats.started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(_place_orders, shop)
            group.start_soon(_stop_on_signal, group.cancel_scope)
            if duration is not None:
                group.cancel_scope.deadline = anyio.current_time() + duration
            if live:
                await _show_live(shop, console, duration)
            else:
                await _show_plain(shop, console)
    if not live:
        # Events of the executions that finished while the scheduler stopped.
        _print_events(stats, console)


async def _place_orders(shop: Shop) -> None:
    for index in itertools.count(1):
        await anyio.to_thread.run_sync(shop.place_order, index)
        await anyio.sleep(ORDER_EVERY)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                scope.cancel()
                return
    except NotImplementedError:  # no signal handlers here: Ctrl-C raises KeyboardInterrupt
        await anyio.sleep_forever()


async def _show_plain(shop: Shop, console: Console) -> None:
    next_status = 0.0
    while True:
        _print_events(shop.stats, console)
        if shop.stats.elapsed() >= next_status:
            snap = await anyio.to_thread.run_sync(_snapshot, shop.scheduler, shop.engine)
            console.print(_status_line(shop.stats, snap), highlight=False, soft_wrap=True)
            next_status += PLAIN_STATUS_EVERY
        await anyio.sleep(REFRESH_EVERY)


def _print_events(stats: Stats, console: Console) -> None:
    events, stats.printed = stats.since(stats.printed)
    for event in events:
        console.print(_event_line(event), highlight=False, soft_wrap=True)


async def _show_live(shop: Shop, console: Console, duration: float | None) -> None:
    def view(snap: Snapshot) -> RenderableType:
        return _live_view(shop.stats, snap, duration, *console.size)

    snap = Snapshot()
    with Live(view(snap), console=console, auto_refresh=False) as live:
        try:
            while True:
                snap = await anyio.to_thread.run_sync(_snapshot, shop.scheduler, shop.engine)
                live.update(view(snap), refresh=True)
                await anyio.sleep(REFRESH_EVERY)
        finally:
            live.update(view(snap), refresh=True)


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _command() -> str:
    """How to run ``sqla-scheduler`` from the current directory, the way this process was
    run: the bare name when the ``PATH`` finds this very script, else the script's path
    (``.venv/bin/sqla-scheduler`` after ``make demo`` in a checkout); for ``python -m
    sqla_scheduler``, this interpreter's (``.venv/bin/python -m sqla_scheduler``)."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.splitext(os.path.basename(script))[0] == "sqla-scheduler":
        return _runnable("sqla-scheduler", script)
    return f"{_runnable('python', sys.executable)} -m sqla_scheduler"


def _runnable(name: str, path: str) -> str:
    """``name`` if the ``PATH`` finds ``path`` by it, else ``path`` (relative to the current
    directory when under it). Symlinks are not followed: a venv's ``python`` links to one
    that does not see the venv's packages."""
    found = shutil.which(name)
    if found is not None and os.path.abspath(found) == os.path.abspath(path):
        return name
    try:
        relative = os.path.relpath(path)
    except ValueError:  # on another drive
        relative = os.pardir
    if relative.startswith(os.pardir):
        return shlex.quote(path)
    return shlex.quote(relative if os.sep in relative else os.path.join(os.curdir, relative))


def _summary(stats: Stats, dead: list[DeadLetter], where: str) -> str:
    command = _command()
    with stats.lock:
        rolled = stats.rolled_back
        sent_anyway = [n for n in rolled if n in stats.confirmed]
        if not rolled:
            rolled_text = "none rolled back"
        elif sent_anyway:
            rolled_text = (
                f"{len(rolled)} rolled back, yet a confirmation was sent for #{sent_anyway[0]}"
            )
        else:
            whose = "whose confirmation was" if len(rolled) == 1 else "whose confirmations were"
            rolled_text = (
                f"{len(rolled)} of them rolled back (#{', #'.join(map(str, rolled))}), "
                f"{whose} never sent"
            )
        pending = len([n for n in stats.placed if n not in stats.confirmed])
        by_reason: dict[str, list[str]] = {}
        for letter in dead:
            by_reason.setdefault(letter.reason, []).append(f"#{letter.order_id}")
        letters = "; ".join(
            f"{'order' if len(orders) == 1 else 'orders'} {', '.join(orders)}: {reason}"
            for reason, orders in by_reason.items()
        )
        dead_text = (
            f"{_plural(len(dead), 'dead letter')} ({letters})" if dead else "no dead letters"
        )
        warnings = (
            f" The scheduler logged {_plural(stats.warnings, 'unexpected warning')}."
            if stats.warnings
            else ""
        )
        return (
            f"Summary after {stats.elapsed():.1f}s: "
            f"{_plural(len(stats.placed) + len(rolled), 'order')} placed, {rolled_text}; "
            f"{_plural(stats.succeeded['send-confirmation'], 'confirmation')} sent, "
            f"{pending} still pending; "
            f"{_plural(stats.succeeded['sweep-carts'], 'cart sweep')}; "
            f"{_plural(stats.succeeded['poll-shipment'], 'shipment poll')}, "
            f"{_plural(stats.delivered, 'parcel')} delivered; "
            f"charges: {stats.succeeded['charge-card']} succeeded, "
            f"{_plural(stats.retried['charge-card'], 'retry', 'retries')}, "
            f"{stats.abandoned['charge-card']} abandoned; {dead_text}.{warnings}\n"
            f"The database is kept; see what is left in it with "
            f"`{command} executions --url {where}`"
            + (
                f", and the abandoned charges (each dead letter's execution, with its error and "
                f"payload) with `{command} history --url {where} --outcome abandoned`."
                if dead
                else "."
            )
        )
