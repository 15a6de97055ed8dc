"""The docstrings the API reference is built from (mkdocstrings renders them as Markdown)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import sqla_scheduler

PACKAGE = Path(sqla_scheduler.__file__).parent
#: A Sphinx cross-reference role, which Markdown shows as it is: ":class:`Cron`".
REST_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|exc|data|mod|obj|const|ref):`")


def test_docstrings_use_markdown_cross_references_not_rest_roles() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if REST_ROLE.search(line)
    ]
    assert not found, (
        "write [`Name`][] (a link mkdocs-autorefs resolves in the docstring's scope) or "
        "``Name`` (code) instead:\n" + "\n".join(found)
    )


def test_docstring_examples_give_the_output_they_show() -> None:
    """Every ``>>>`` example; in a docstring it sits in a ```pycon block that the reference
    shows as code, with a blank line before the closing fence to end the expected output."""
    finder, runner, report = doctest.DocTestFinder(), doctest.DocTestRunner(), []
    for module in pkgutil.walk_packages(sqla_scheduler.__path__, "sqla_scheduler."):
        if module.name != "sqla_scheduler.__main__":
            for test in finder.find(importlib.import_module(module.name)):
                runner.run(test, out=report.append)
    assert runner.tries, "no examples found"
    assert not runner.failures, "".join(report)
