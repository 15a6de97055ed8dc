"""Run ``sqla-scheduler`` as a user would: a real process, this checkout's package.

Plain module, like ``_postgres``. The console script next to ``sys.executable`` belongs to
whichever checkout was installed; ``PYTHONPATH`` puts this one first, so both ways of
running the command (the script and ``python -m sqla_scheduler``) run the code under test.

A process costs most of a second of CPU to start, so a test about what a command reads or
prints runs it with [`invoke`][], in this process; a test about the process itself (its
exit status and stderr from the shell's side, signals, ``--app`` modules read at import,
the two invocations) runs it with [`run`][].
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner

from sqla_scheduler.cli import cli

ROOT = Path(__file__).resolve().parents[2]

#: The two ways to run the command line.
INVOCATIONS = {
    "console-script": [str(Path(sys.executable).with_name("sqla-scheduler"))],
    "python-m": [sys.executable, "-m", "sqla_scheduler"],
}


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment without ``DATABASE_URL``, this checkout first on the path."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def start(
    *args: str, invocation: str = "python-m", env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``sqla-scheduler ARGS`` from the repository root; stdout and stderr piped."""
    return subprocess.Popen(
        [*INVOCATIONS[invocation], *args],
        cwd=ROOT,
        env=env if env is not None else cli_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(
    *args: str,
    invocation: str = "python-m",
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``sqla-scheduler ARGS`` to completion (killed after ``timeout`` seconds)."""
    proc = start(*args, invocation=invocation, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_from_root(
    argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to completion from the repository's root (killed after ``timeout``
    seconds), its output as text; ``env`` is the whole environment (default:
    [`cli_env`][])."""
    return subprocess.run(
        list(argv),
        cwd=ROOT,
        env=cli_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_example(script: str, **env: str) -> str:
    """Run ``examples/SCRIPT`` as a newcomer would (``python examples/SCRIPT``), this
    checkout's package first on the path and ``env`` set; what it printed, once it has
    exited 0 (within 120 seconds)."""
    done = run_from_root(
        [sys.executable, str(ROOT / "examples" / script)], env=cli_env(**env), timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def invoke(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``sqla-scheduler ARGS`` in this process, as [`run`][] would in its own.

    ``env`` is the whole environment, as for [`run`][] (default: [`cli_env`][]): variables
    it leaves out are unset for the command's duration. Exceptions the command does not
    turn into an exit status propagate, where a process would print a traceback.
    """
    wanted = env if env is not None else cli_env()
    changes: dict[str, str | None] = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    changes |= {k: None for k in os.environ if k not in wanted}
    result = CliRunner().invoke(
        cli, list(args), env=changes, catch_exceptions=False, prog_name="sqla-scheduler"
    )
    return subprocess.CompletedProcess(
        ["sqla-scheduler", *args], result.exit_code, result.stdout, result.stderr
    )


def invoke_all(
    *commands: tuple[str, ...], env: Mapping[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """[`invoke`][] each command in turn."""
    return [invoke(*args, env=env) for args in commands]


def run_all(
    *commands: tuple[str, ...], env: dict[str, str] | None = None, timeout: float = 60
) -> list[subprocess.CompletedProcess[str]]:
    """Run several ``sqla-scheduler`` commands at once (each pays its start-up in parallel)."""
    procs = [start(*args, env=env) for args in commands]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done


def one_error_line(err: str) -> str:
    """The single ``sqla-scheduler: ...`` line a failure prints; fail if there is more."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("sqla-scheduler: "), err
    return lines[0]
