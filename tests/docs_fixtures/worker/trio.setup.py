"""Before the trio script: its imports, and a greeting task with greetings due."""

import anyio
import trio
from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, one_time

NAMES = ["ada", "bob", "cy"]
greeted: list[str] = []
all_greeted = trio.Event()  # a trio Event needs no running loop to be made


@one_time("greet", payload_type=str)
async def greet(ctx: ExecutionContext[str]) -> None:
    await trio.lowlevel.checkpoint()  # this handler runs on trio's event loop
    greeted.append(ctx.payload)
    if len(greeted) == len(NAMES):
        all_greeted.set()


web = Scheduler(create_engine("sqlite:///app.db"), tasks=[greet])
web.schedule_batch(web.engine, [greet.instance(name, name) for name in NAMES])
