"""The page's conftest.py and test file, run by pytest as a user's project runs them (the
plugin comes from the installed package's entry point)."""

import subprocess
import sys

run = subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_reminders.py"],
    capture_output=True,
    text=True,
    timeout=120,
    check=False,
)
assert run.returncode == 0, run.stdout + run.stderr
assert "3 passed" in run.stdout, run.stdout
