"""The optional extras (``pip install sqla-scheduler[EXTRA]``): the error a module or a call
raises when the package its extra brings is missing, saying which extra to install."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(what: str, needs: str, extra: str) -> ImportError:
    """The ``ImportError`` of ``what``, which ``needs`` a package of the extra ``extra``."""
    return ImportError(f"{what} needs {needs}: pip install sqla-scheduler[{extra}]")
