"""The README's first command, run as a new user runs it: ``bash scripts/demo.sh``.

A fresh ``git clone`` of the committed HEAD, no virtualenv there, no ``DEMO_PYTHON``:
the script makes ``.venv`` with the ``python3`` it finds on ``PATH`` and installs the
project from the package index, as on a fresh Debian machine. Once on Python 3.11
(Django 5.2, which needs the django-tasks backport) and once on Python 3.13 (Django 6).
Each run waits for the admin's log-in page and for the worker to run a task, then stops
the demo as a user does (Ctrl-C at the terminal, or SIGTERM) and checks that nothing of
it is left running. Only the ports are the test's choice (``DEMO_REDIS_PORT`` and
``--port``): tests run side by side.

Each run installs the project, so CI's two whole-suite environments run one each: the
Python 3.11 run in the Python 3.11 suite, the Python 3.13 run in the Python 3.13 suite
(``LEDGER_TEST_HALF``); a developer's run makes both.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
#: A virtualenv made and the project installed from the index, then migrate and seed.
START_TIMEOUT = 600.0
TASK_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

pytestmark = pytest.mark.standalone_only(reason="the demo starts a Redis of its own")

#: The runs: the Python the demo finds, how the user stops it, and CI's half that makes it.
RUNS = [
    pytest.param("3.11", signal.SIGINT, id="python3.11-ctrl-c"),
    pytest.param("3.13", signal.SIGTERM, id="python3.13-sigterm"),
]
HALVES = {"3.11": "a", "3.13": "b"}


def find_python(version: str) -> str | None:
    """Return the base interpreter of Python ``version``, as scripts/test.sh finds it.

    On ``PATH`` first (the interpreter a virtualenv was made from, when ``PATH`` names a
    virtualenv's), else pyenv's newest ``version.*``.
    """
    code = (
        "import os, sys; "
        f"print(os.path.join(sys.base_prefix, 'bin', 'python{version}'))"
        f" if sys.version_info[:2] == {tuple(int(p) for p in version.split('.'))} else None"
    )
    candidates = [shutil.which(f"python{version}")]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))
    candidates += sorted(found, key=lambda p: [int(x) for x in p.split("/")[-3].split(".")])[::-1]
    for candidate in candidates:
        if candidate is None:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                [candidate, "-c", code], capture_output=True, text=True, timeout=30
            )
            path = done.stdout.strip()
            if done.returncode == 0 and path and os.access(path, os.X_OK):
                return path
    return None


def is_virtualenv_bin(entry: str) -> bool:
    """Whether ``entry`` is a virtualenv's ``bin`` (tox's, or one the caller activated)."""
    return Path(entry).name == "bin" and (Path(entry).parent / "pyvenv.cfg").is_file()


def new_user_env(bin_dir: Path, redis_port: int) -> dict[str, str]:
    """A user's environment: no virtualenv active, no settings of the project's, no demo's."""
    dropped = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "REDIS_URL", "DATABASE_PATH"}
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.startswith(("DJANGO_", "LEDGER_", "DEMO_", "TOX_"))
    }
    path = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry]
    env["PATH"] = os.pathsep.join([str(bin_dir), *(e for e in path if not is_virtualenv_bin(e))])
    env["DEMO_REDIS_PORT"] = str(redis_port)
    return env


def session_members(session: int) -> list[int]:
    """Return the processes of ``session`` still there (zombies included)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == session:  # state, ppid, pgrp, session
            members.append(int(entry.name))
    return members


def login_page(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=5) as page:
            return page.read().decode() if page.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run this from a git checkout, with git installed")
        pytest.skip("needs git and the project's git checkout to clone")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    target = tmp_path / "django-ledger"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "--quiet", head], check=True)
    assert not (target / ".venv").exists() and not (target / ".demo").exists()
    return target


@contextlib.contextmanager
def running_demo(
    clone: Path, env: dict[str, str], http_port: int, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        demo = subprocess.Popen(
            ["bash", "scripts/demo.sh", "--port", str(http_port)],
            cwd=clone,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: the test can find all its processes
        )
    try:
        yield demo
    finally:
        if demo.poll() is None:  # the test failed before stopping it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(demo.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                demo.wait(timeout=STOP_TIMEOUT)
        for pid in session_members(demo.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.wait(timeout=STOP_TIMEOUT)


@pytest.mark.parametrize(
    ("version", "stop"),
    [
        run
        for run in RUNS
        if os.environ.get("LEDGER_TEST_HALF") in (None, "", HALVES[str(run.values[0])])
    ],
)
def test_the_readme_command_on_a_fresh_clone(
    clone: Path, tmp_path: Path, version: str, stop: signal.Signals
) -> None:
    python = find_python(version)
    if python is None:
        pytest.skip(f"python{version} not found (on PATH or under pyenv)")
    # The interpreter the script picks first: python3 on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    redis_port, http_port = free_port(), free_port()
    log = tmp_path / "demo.log"

    def output() -> str:
        return log.read_text(errors="replace")

    with running_demo(clone, new_user_env(bin_dir, redis_port), http_port, log) as demo:
        deadline = time.monotonic() + START_TIMEOUT
        page = None
        while "serving http://" not in output() or (page := login_page(http_port)) is None:
            assert demo.poll() is None, f"the demo stopped (status {demo.returncode}):\n{output()}"
            assert time.monotonic() < deadline, f"no admin in {START_TIMEOUT:.0f} s:\n{output()}"
            time.sleep(0.5)
        assert "Log in" in page and 'name="password"' in page
        # The .venv the script made: on the Python it found, with the Django pip chose.
        code = "import sys, django; print(*sys.version_info[:2], *django.VERSION[:2])"
        found = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-c", code],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        pythons, djangos = ".".join(found[:2]), tuple(map(int, found[2:]))
        assert pythons == version, found
        if version == "3.11":  # Django 6 needs Python 3.12: pip takes 5.2 and the backport
            assert djangos == (5, 2), found
        else:
            assert djangos >= (6, 0), found

        # The worker runs the tasks its scheduler admits (ended well or failed, both ran).
        client = redis.Redis(port=redis_port)
        try:
            deadline = time.monotonic() + TASK_TIMEOUT
            while not client.zcard("{ledger:tasks}:completed") + client.zcard(
                "{ledger:tasks}:failed"
            ):
                assert demo.poll() is None, f"the demo stopped:\n{output()}"
                assert time.monotonic() < deadline, f"no task ran:\n{output()}"
                time.sleep(0.2)
            assert client.zcard("ledger:workers") >= 1
            redis_pid = int(client.info("server")["process_id"])
        finally:
            client.close()
        assert (clone / ".demo" / "env").is_file()
        assert len(session_members(demo.pid)) >= 4  # the script, Redis, the admin, the worker

        if stop is signal.SIGINT:  # Ctrl-C: the terminal signals the whole process group
            os.killpg(demo.pid, signal.SIGINT)
        else:
            os.kill(demo.pid, signal.SIGTERM)
        assert demo.wait(timeout=STOP_TIMEOUT) == 128 + stop, output()
        assert "demo stopped" in output()
        assert session_members(demo.pid) == [], "processes of the demo outlived it"
        with pytest.raises(ProcessLookupError):
            os.kill(redis_pid, 0)
        assert login_page(http_port) is None
        assert not (clone / ".demo" / "env").exists()
