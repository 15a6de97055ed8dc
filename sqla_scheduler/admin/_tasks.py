"""The admin page's actions on whole tasks: pause and resume, as ``Scheduler.pause`` and
``Scheduler.resume`` do them, cluster-wide."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from sqla_scheduler._checks import check_task_name
from sqla_scheduler.admin._pages import NOTICES, Handlers, answer, log_action
from sqla_scheduler.exceptions import TaskDefinitionError

__all__ = ["TaskActions"]


class TaskActions(Handlers):
    """The request handlers of pause and resume."""

    async def pause(self, request: Request) -> Response:
        """Pause a task registered here: no scheduler picks its executions until resumed."""
        return await self._set_paused(request, paused=True)

    async def resume(self, request: Request) -> Response:
        """Resume a paused task, registered here or not (it may have been paused by name
        elsewhere)."""
        return await self._set_paused(request, paused=False)

    async def _set_paused(self, request: Request, *, paused: bool) -> Response:
        action = "pause" if paused else "resume"
        user, form = await self.pages.checked_form(request, action)
        task = form.get("task") or ""
        try:
            check_task_name(task)
        except TaskDefinitionError as exc:
            raise HTTPException(400, str(exc)) from None
        if paused and task not in self.scheduler.tasks:
            raise HTTPException(404, f"No task {task!r} is registered here; nothing was paused.")
        done = await self.actions.set_paused(task, paused)
        why = f"{task!r} is {'paused already' if paused else 'not paused'}"
        log_action(
            action,
            user,
            done,
            "%s by %r of task %r: %s",
            action,
            user,
            task,
            NOTICES[action] if done else "refused: " + why,
            task_name=task,
        )
        return answer(request, form.get("back"), action, done=done, why=why, missing=False)
