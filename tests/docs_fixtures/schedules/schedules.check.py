"""After the page's code: the text forms it lists read back to what they say (two columns,
notes in parentheses), and a decorator's error reads as the page shows it (``(...)``
standing for the rest)."""

import re
from pathlib import Path

from sqla_scheduler import Cron, Disabled, FixedDelay, recurring

forms = [
    form
    for line in Path("text-forms.txt").read_text().splitlines()
    for form in re.split(r"\s{2,}", line.strip())
    if not form.startswith("(")
]
assert len(forms) == 7, forms
for form in forms:
    assert str(parse_schedule(form)) == form, form
assert parse_schedule("FIXED_DELAY|30s|1h") == FixedDelay("30s", initial_delay="1h")
assert parse_schedule("CRON|*/5 * * * *") == Cron("*/5 * * * *", tz="UTC")
assert parse_schedule("-") == Disabled()

shown = " ".join(Path("decorator-error.txt").read_text().split())
try:

    @recurring("x", "FIXED_RATE|soon")
    def x(ctx) -> None: ...

except InvalidScheduleError as error:
    raised = f"{type(error).__name__}: {error}"
else:
    raise AssertionError("not rejected")
pattern = ".*".join(re.escape(part) for part in shown.split("(...)"))
assert re.fullmatch(pattern, raised), raised
