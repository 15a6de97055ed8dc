"""Before it: two databases' engines and the three tasks (nothing connects)."""

from typing import Any

from sqlalchemy import create_engine

from sqla_scheduler import Scheduler, one_time

billing_engine = create_engine("sqlite:///billing.db")
reports_engine = create_engine("sqlite:///reports.db")


@one_time("charge-card")
def charge_card(ctx: Any) -> None: ...


@one_time("send-invoice")
def send_invoice(ctx: Any) -> None: ...


@one_time("build-report")
def build_report(ctx: Any) -> None: ...
