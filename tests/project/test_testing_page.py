"""The Testing page's sample, run as written: its test module passes in a fresh project.

The project is the one of Getting started (``startproject mysite``, ``startapp shop``,
that page's settings block); the Testing page gives ``shop/tasks.py``, ``conftest.py``,
``pytest.ini`` and ``shop/test_receipts.py``. pytest runs in a process of its own, where
the kit starts its own redis-server: the settings' 6379 is never contacted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import django

from tests.project.test_getting_started import SETTINGS, installed_apps_here

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```$", PAGE, re.M | re.S)
INI = re.findall(r"^```ini\n(.*?)^```$", PAGE, re.M | re.S)[0]
CONFTEST = next(block for block in PYTHON_BLOCKS if block.startswith("pytest_plugins"))
TASKS = next(block for block in PYTHON_BLOCKS if "@task" in block)
MODULE = next(block for block in PYTHON_BLOCKS if "def test_" in block)
TIMEOUT = 300


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_page_loads_the_plugin_and_uses_each_helper() -> None:
    assert CONFTEST.strip() == 'pytest_plugins = ["django_ledger.testing.pytest_plugin"]'
    for name in ("run_due_tasks()", "captured_tasks()", "assert_enqueued(", "refute_enqueued("):
        assert name in MODULE, name
    assert '"EAGER": True' in MODULE and "LedgerTestCase" in MODULE


def test_the_sample_module_passes_in_a_fresh_project(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("REDIS_URL", None)
    run([sys.executable, "-m", "django", "startproject", "mysite", "."], tmp_path, env)
    run([sys.executable, "manage.py", "startapp", "shop"], tmp_path, env)
    settings = tmp_path / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + "\n" + installed_apps_here(SETTINGS))
    tasks = TASKS
    if django.VERSION < (6, 0):  # as the page says: the backport on Django 5.2
        tasks = tasks.replace("from django.tasks import task", "from django_tasks import task")
    (tmp_path / "shop" / "tasks.py").write_text(tasks, encoding="utf-8")
    (tmp_path / "shop" / "test_receipts.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(INI, encoding="utf-8")

    done = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "shop/test_receipts.py"],
        tmp_path,
        env,
    )
    tests = len(re.findall(r"^    def test_|^def test_", MODULE, re.M))
    assert tests == 4
    assert re.search(rf"^{tests} passed", done.stdout, re.M), done.stdout
