"""The Getting started page, run as a newcomer runs it, in a fresh project.

``django-admin startproject`` and ``startapp`` make the project in a temporary
directory; the page's settings block is appended to its settings, its task block is
``shop/tasks.py``; ``migrate`` runs; the enqueue block runs in one process (the page's
shell), a real ``ledger_worker --burst`` in another, then the result block in the
first. The only change to what the page shows is the Redis URL: the test's own
redis-server, never the machine's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```$", PAGE, re.M | re.S)
SHELL_BLOCKS = re.findall(r"^```sh\n(.*?)^```$", PAGE, re.M | re.S)
SETTINGS = next(block for block in PYTHON_BLOCKS if "LEDGER = {" in block)
TASK_MODULE = next(block for block in PYTHON_BLOCKS if "@task" in block)
ENQUEUE = next(block for block in PYTHON_BLOCKS if ".enqueue(" in block)
READ = next(block for block in PYTHON_BLOCKS if "result.refresh()" in block)
#: The Redis URL the page's settings name: replaced by the suite's own server before anything runs.
PAGE_URL = re.search(r"redis://[^\"' ]+", SETTINGS).group()  # type: ignore[union-attr]
TIMEOUT = 120

# The page's shell session: the enqueue, a worker in another process, the result.
SESSION = """\
import os, subprocess, sys
import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django.setup()
scope = {}
exec(open("enqueue.py").read(), scope)
worker = subprocess.run(
    [sys.executable, "manage.py", "ledger_worker", "--burst"],
    capture_output=True, text=True, timeout=WORKER_TIMEOUT,
)
print("WORKER EXIT", worker.returncode)
print(worker.stdout + worker.stderr, file=sys.stderr)
exec(open("read.py").read(), scope)
from django.test import Client
from django.contrib.auth.models import User

# As on runserver's address: the project keeps startproject's ALLOWED_HOSTS.
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(User.objects.create_superuser("ada", "ada@example.com", "pw"))
for url in ("/admin/django_ledger/record/", "/admin/django_ledger/queue/tasks/",
            "/admin/django_ledger/worker/"):
    page = client.get(url)
    print("ADMIN", url, page.status_code, scope["result"].id in page.content.decode())
""".replace("WORKER_TIMEOUT", str(TIMEOUT))


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def installed_apps_here(settings: str) -> str:
    """The page's settings, less the backport where Django has the framework built in."""
    try:
        import django_tasks  # noqa: F401
    except ImportError:
        return re.sub(r'^\s*"django_tasks",.*\n', "", settings, flags=re.M)
    return settings


def test_the_page_shows_the_steps_a_newcomer_runs() -> None:
    commands = "\n".join(SHELL_BLOCKS)
    assert "pip install 'django-task-ledger[tasks]'" in commands
    for step in ("migrate", "ledger_worker --burst", "createsuperuser", "runserver"):
        assert f"python manage.py {step}" in commands
    assert SETTINGS.count(PAGE_URL) == 1
    assert '"BACKEND": "django_ledger.tasks.LedgerBackend"' in SETTINGS


def test_the_first_task_runs_and_its_result_reads_back(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    admin = [sys.executable, "-m", "django"]
    run([*admin, "startproject", "mysite", "."], tmp_path, env)
    run([sys.executable, "manage.py", "startapp", "shop"], tmp_path, env)

    settings = tmp_path / "mysite" / "settings.py"
    block = installed_apps_here(SETTINGS).replace(PAGE_URL, redis_server.url)
    settings.write_text(settings.read_text() + "\n" + block, encoding="utf-8")
    (tmp_path / "shop" / "tasks.py").write_text(TASK_MODULE, encoding="utf-8")
    (tmp_path / "enqueue.py").write_text(ENQUEUE, encoding="utf-8")
    (tmp_path / "read.py").write_text(READ, encoding="utf-8")
    (tmp_path / "session.py").write_text(SESSION, encoding="utf-8")

    run([sys.executable, "manage.py", "check", "--fail-level", "WARNING"], tmp_path, env)
    run([sys.executable, "manage.py", "migrate", "-v", "0"], tmp_path, env)
    lines = run([sys.executable, "session.py"], tmp_path, env).stdout.splitlines()

    request_id, status = lines[0].split()
    assert status == "READY"
    assert lines[1] == "WORKER EXIT 0"
    # What the page's comment promises: "SUCCESSFUL 2599".
    promised = re.search(r"print\(result.status, result.return_value\)\s+# (.+)$", READ, re.M)
    assert promised is not None and lines[2] == promised.group(1) == "SUCCESSFUL 2599"
    attempts, worker = lines[3].split(" ", 1)
    assert attempts == "1" and worker.startswith("[") and worker != "[]"
    # The admin pages the page points at answer, the record's list naming the task.
    assert lines[4:] == [
        "ADMIN /admin/django_ledger/record/ 200 True",
        "ADMIN /admin/django_ledger/queue/tasks/ 200 False",
        "ADMIN /admin/django_ledger/worker/ 200 False",
    ]
    # The worker wrote under the page's namespace, in the test's Redis.
    keys = [os.fsdecode(key) for key in redis_server.client().keys("*")]
    assert keys and all(key.startswith(("mysite", "{mysite")) for key in keys)
    assert request_id
