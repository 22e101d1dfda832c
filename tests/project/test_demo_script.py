"""``scripts/demo.sh`` started in the background by a script, then stopped by a signal.

A script's background job starts with SIGINT ignored, which bash cannot trap; the demo
must stop cleanly on SIGINT and SIGTERM all the same: its server and its Redis gone,
its env file removed. ``DEMO_PYTHON`` (this interpreter, which has the project
installed) spares the virtualenv and the install, so nothing needs the network.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.support.redis_server import find_binary, free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
# Started the way a supervisor script would: in the background, without job control.
LAUNCHER = 'bash scripts/demo.sh "$@" >"$DEMO_LOG" 2>&1 &\necho $!\nwait $!\necho "status $?"\n'


@dataclass
class Demo:
    launcher: subprocess.Popen[str]
    pid: int
    folder: Path
    redis_port: int
    http_port: int
    env: dict[str, str]
    log_name: str = "demo.log"

    @property
    def log(self) -> str:
        path = self.folder / self.log_name
        return path.read_text(errors="replace") if path.exists() else ""


def answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def demo_env(folder: Path, redis_port: int) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "LEDGER_", "DEMO_"))
        and key not in {"REDIS_URL", "DATABASE_PATH"}
    }
    env.update(
        DEMO_DIR=str(folder),
        DEMO_PYTHON=sys.executable,
        DEMO_REDIS_PORT=str(redis_port),
        DEMO_LOG=str(folder / "demo.log"),
        REDIS_SERVER_BIN=find_binary(),
    )
    return env


def stop_all(demo: Demo) -> None:
    """Stop a demo the test left running: TERM as a user would, then KILL its group."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(demo.pid, signal.SIGTERM)
    try:
        demo.launcher.communicate(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(demo.launcher.pid, signal.SIGKILL)
        demo.launcher.communicate()


def stop(demo: Demo) -> None:
    """SIGTERM, as a user's supervisor stops it: it ends 143 with all of it gone."""
    os.kill(demo.pid, signal.SIGTERM)
    assert demo.launcher.communicate(timeout=STOP_TIMEOUT)[0].strip() == "status 143", demo.log
    assert session_members(demo.launcher.pid) == [], demo.log


def session_members(session: int, named: str = "") -> list[int]:
    """Return the processes of ``session`` whose command line contains ``named``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == session and named in command:
            members.append(int(entry.name))
    return members


def tasks_ended(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        return int(client.zcard("{ledger:tasks}:completed") + client.zcard("{ledger:tasks}:failed"))
    finally:
        client.close()


def logs_in(port: int, password: str) -> bool:
    """Log in to the admin as ``admin`` the way a browser does; True when it lets us in."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    url = f"http://127.0.0.1:{port}/admin/login/"
    with opener.open(url) as page:
        form = page.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token is not None, form
    body = urllib.parse.urlencode(
        {
            "csrfmiddlewaretoken": token.group(1),
            "username": "admin",
            "password": password,
            "next": "/admin/",
        }
    ).encode()
    with opener.open(urllib.request.Request(url, body, headers={"Referer": url})) as answer:
        # Let in: the admin's index (its log-out form); refused: the log-in form again.
        return answer.url.endswith("/admin/") and "logout" in answer.read().decode()


def start_demo(folder: Path, redis_port: int, http_port: int, log: str = "demo.log") -> Demo:
    """Start the demo the way a supervisor script would; return once its admin answers."""
    env = {**demo_env(folder, redis_port), "DEMO_LOG": str(folder / log)}
    launcher = subprocess.Popen(
        ["bash", "-c", LAUNCHER, "launcher", "--port", str(http_port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        # A process group of its own: a test that fails can still stop every process.
        start_new_session=True,
    )
    assert launcher.stdout is not None
    running = Demo(
        launcher, int(launcher.stdout.readline()), folder, redis_port, http_port, env, log
    )
    deadline = time.monotonic() + START_TIMEOUT
    while "serving http://" not in running.log or not answers(http_port):
        if launcher.poll() is not None or time.monotonic() > deadline:
            stop_all(running)
            pytest.fail(f"the demo did not start:\n{running.log}")
        time.sleep(0.2)
    return running


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    folder = tmp_path / "demo"
    folder.mkdir()
    running = start_demo(folder, free_port(), free_port())
    try:
        yield running
    finally:
        if running.launcher.poll() is None:  # the test failed before stopping it
            stop_all(running)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_signal_stops_everything(demo: Demo, number: signal.Signals) -> None:
    client = redis.Redis(port=demo.redis_port)
    redis_pid = int(client.info("server")["process_id"])
    client.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{demo.http_port}/admin/login/") as page:
        assert page.status == 200
    assert (demo.folder / "env").is_file()

    os.kill(demo.pid, number)
    assert demo.launcher.stdout is not None
    out, _ = demo.launcher.communicate(timeout=STOP_TIMEOUT)
    assert out.strip() == f"status {128 + number}", demo.log
    assert "demo stopped" in demo.log
    assert not answers(demo.http_port) and not answers(demo.redis_port)
    with pytest.raises(ProcessLookupError):
        os.kill(redis_pid, 0)
    assert not (demo.folder / "env").exists()


def test_manage_py_reaches_the_running_demo_through_its_env_file(demo: Demo) -> None:
    env = {key: value for key, value in demo.env.items() if not key.startswith("DEMO_")}
    env["DEMO_DIR"] = str(demo.folder)
    code = (
        "from django.conf import settings; from django_ledger import get_ledger; "
        "print('demo:', settings.REDIS_URL, get_ledger('emails').resolve('demo-claimed').state)"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Django 5.2's shell also prints how many objects it imported: read our line only.
    line = next(line for line in done.stdout.splitlines() if line.startswith("demo: "))
    assert line.split() == ["demo:", f"redis://127.0.0.1:{demo.redis_port}/0", "CLAIMED"]
    os.kill(demo.pid, signal.SIGTERM)
    demo.launcher.communicate(timeout=STOP_TIMEOUT)


def test_a_second_demo_on_the_same_folder_refuses(demo: Demo) -> None:
    env = {**demo.env, "DEMO_REDIS_PORT": str(free_port())}
    done = subprocess.run(
        ["bash", "scripts/demo.sh", "--no-serve"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"a demo is running already (pid {demo.pid}" in done.stderr
    assert (demo.folder / "env").is_file()  # still the running demo's
    os.kill(demo.pid, signal.SIGTERM)
    demo.launcher.communicate(timeout=STOP_TIMEOUT)


def test_the_demo_runs_a_worker_and_its_schedules_keep_work_flowing(demo: Demo) -> None:
    # The demo's scheduler admits a receipt every 3 s into "tasks"; its worker runs them.
    client = redis.Redis(port=demo.redis_port)
    completed = "{ledger:tasks}:completed"
    failed = "{ledger:tasks}:failed"
    deadline = time.monotonic() + 45
    while client.zcard(completed) + client.zcard(failed) < 2:
        assert time.monotonic() < deadline, f"no task ended in 45 s:\n{demo.log}"
        time.sleep(0.2)
    assert client.zcard("ledger:workers") == 1  # the worker's heartbeat: one live worker
    client.close()
    os.kill(demo.pid, signal.SIGTERM)
    assert demo.launcher.communicate(timeout=STOP_TIMEOUT)[0].strip() == "status 143"


def test_a_killed_worker_is_replaced_and_the_rest_keeps_running(demo: Demo) -> None:
    deadline = time.monotonic() + 45
    while not tasks_ended(demo.redis_port):
        assert time.monotonic() < deadline, f"no task ended in 45 s:\n{demo.log}"
        time.sleep(0.2)
    (worker,) = session_members(demo.launcher.pid, "ledger_worker")
    redis_pids = session_members(demo.launcher.pid, "redis-server")
    os.kill(worker, signal.SIGKILL)

    deadline = time.monotonic() + 30
    while not (workers := session_members(demo.launcher.pid, "ledger_worker")) or workers == [
        worker
    ]:
        assert demo.launcher.poll() is None, f"the demo stopped:\n{demo.log}"
        assert time.monotonic() < deadline, f"no new worker in 30 s:\n{demo.log}"
        time.sleep(0.1)
    (replacement,) = workers
    # Said on the terminal, and the new one runs the tasks that keep coming.
    assert (
        f"the worker (pid {worker}) ended with status 137: started another, pid {replacement}"
        in demo.log
    )
    ended = tasks_ended(demo.redis_port)
    deadline = time.monotonic() + 45
    while tasks_ended(demo.redis_port) <= ended:
        assert time.monotonic() < deadline, f"no task ended after the restart:\n{demo.log}"
        time.sleep(0.2)
    with urllib.request.urlopen(f"http://127.0.0.1:{demo.http_port}/admin/login/") as page:
        assert page.status == 200
    assert session_members(demo.launcher.pid, "redis-server") == redis_pids
    stop(demo)


def test_the_admin_password_survives_a_restart(demo: Demo) -> None:
    found = re.search(r"user admin, password (\S+)", demo.log)
    assert found is not None, demo.log
    password = found.group(1)
    assert logs_in(demo.http_port, password)
    assert not logs_in(demo.http_port, password + "x")
    stop(demo)

    again = start_demo(demo.folder, demo.redis_port, demo.http_port, "demo-again.log")
    try:
        assert f"user admin, password {password} (kept in " in again.log, again.log
        assert logs_in(again.http_port, password)
    finally:
        stop_all(again)
