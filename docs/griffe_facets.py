"""A Griffe extension for the API reference: the methods ``Scheduler`` exposes from its
facets are documented as the facets define them.

``Scheduler`` holds its facets (``self._control = Control(...)``) and exposes their
methods as its own (``reschedule = _Faced(lambda scheduler: scheduler._control.reschedule)``).
Read without running the code, such a member is an attribute with no docstring; this
extension makes it an alias of the facet's method (``Control.reschedule``), so that the
reference shows its signature, overloads and docstring under the scheduler's name, as it
shows an inherited method.
"""

from __future__ import annotations

from typing import Any

import griffe

EXPOSED_BY = "_Faced"
"""The descriptor that exposes a facet's method (``sqla_scheduler.scheduler``)."""


class FacetMethods(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        for name, member in list(cls.members.items()):
            target = _facet_method(cls, member)
            if target is not None:
                alias = griffe.Alias(
                    name, target, parent=cls, lineno=member.lineno, endlineno=member.endlineno
                )
                cls.set_member(name, alias)


def _facet_method(cls: griffe.Class, member: griffe.Object | griffe.Alias) -> str | None:
    """The path of the facet's method ``member`` exposes (``_Faced(lambda s:
    s.<facet>.<method>)``, the facet made in ``__init__``); ``None`` for other members."""
    value = getattr(member, "value", None)
    if not (isinstance(value, griffe.ExprCall) and str(value.function) == EXPOSED_BY):
        return None
    (getter,) = value.arguments
    if not isinstance(getter, griffe.ExprLambda) or not isinstance(
        getter.body, griffe.ExprAttribute
    ):
        raise ValueError(
            f"{cls.path}.{member.name}: expected {EXPOSED_BY}(lambda s: s.facet.method)"
        )
    _scheduler, facet, method = (str(part) for part in getter.body.values)
    made = getattr(cls.members.get(facet), "value", None)
    if not isinstance(made, griffe.ExprCall):
        raise ValueError(f"{cls.path}.{member.name}: {facet} is not made in {cls.name}.__init__")
    return f"{made.canonical_path}.{method}"
