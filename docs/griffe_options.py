"""A Griffe extension for the API reference: the task decorators' keyword options are
shown one by one, as a signature of their own would show them.

``one_time``, ``custom`` and ``recurring`` take their shared options as
``**options: Unpack[_TaskOptions]`` (a private ``TypedDict``), so that they are written
once. Read as it is, the reference would show that one private name; this extension puts
each key of the ``TypedDict`` in its place as a keyword-only parameter, with its type and
the default it takes when left out: the default of the task's field of its name.
"""

from __future__ import annotations

from typing import Any

import griffe

MODULE = "sqla_scheduler.tasks"
"""The module whose functions take options."""
FIELDS = "OneTimeTask"
"""A class with a field for every option (its own and ``Task``'s), whose defaults the
options take."""
UNPACK = {"typing.Unpack", "typing_extensions.Unpack"}


class UnpackedOptions(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != MODULE.partition(".")[0]:
            return
        module = pkg.modules_collection[MODULE]
        fields = module[FIELDS]
        for function in module.functions.values():
            for signature in [*(function.overloads or []), function]:
                _unpack(signature, fields)


def _unpack(function: griffe.Function, fields: griffe.Class) -> None:
    """Replace ``function``'s ``**options: Unpack[X]`` by X's keys."""
    options = next(
        (p for p in function.parameters if p.kind is griffe.ParameterKind.var_keyword), None
    )
    annotation = None if options is None else options.annotation
    if not (isinstance(annotation, griffe.ExprSubscript) and annotation.canonical_path in UNPACK):
        return
    typed_dict = function.modules_collection[annotation.slice.canonical_path]
    del function.parameters[options.name]
    for name, key in _keys(typed_dict).items():
        function.parameters[name] = griffe.Parameter(
            name,
            annotation=key.annotation,
            kind=griffe.ParameterKind.keyword_only,
            default=_default(fields.all_members[name]),
        )


def _keys(typed_dict: griffe.Class) -> dict[str, griffe.Attribute]:
    """The keys of ``typed_dict`` in the order Python has them: its bases', one base after
    the other, then its own."""
    keys: dict[str, griffe.Attribute] = {}
    for base in typed_dict.resolved_bases:
        keys.update(_keys(base))
    keys.update((name, key) for name, key in typed_dict.members.items() if key.is_attribute)
    return keys


def _default(field: griffe.Object | griffe.Alias) -> str | griffe.Expr | None:
    """The default of a dataclass field: its value, or what ``field(default_factory=f)``
    makes (``None`` there: the decorators take ``None`` for an empty one)."""
    value = field.value
    if isinstance(value, griffe.ExprCall) and str(value.function) == "field":
        return "None"
    return value
