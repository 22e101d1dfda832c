"""The kit's throwaway Redis: found or explained, and a ledger of each test's own on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from django_ledger import get_ledger
from django_ledger.testing import RedisServer, RedisServerError, isolated_ledger
from django_ledger.testing.redis import FORBIDDEN_PORT, find_binary
from tests.support.tasks_app import tasks as t

pytest_plugins = ["django_ledger.testing.pytest_plugin"]

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "no redis-server found: install Redis (apt install redis-server, brew install redis)"


def test_without_a_binary_the_error_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("REDIS_SERVER_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerError) as raised:
        find_binary()
    assert str(raised.value) == f"{INSTALL} or set REDIS_SERVER_BIN to its path"


def test_a_redis_server_bin_that_is_no_program_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REDIS_SERVER_BIN", str(tmp_path / "nothing"))
    with pytest.raises(
        RedisServerError, match=r"REDIS_SERVER_BIN=.*nothing.* is not an executable"
    ):
        RedisServer().start()


def test_the_fixture_fails_with_that_sentence_when_redis_is_missing(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "def test_needs_redis(ledger_redis_server):\n    pass\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "REDIS_SERVER_BIN"}
    env.update(PATH=str(Path(sys.executable).parent), PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "django_ledger.testing.pytest_plugin", "-q",
         "-p", "no:cacheprovider", "-p", "no:django", "test_sample.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"the ledger's tests need Redis: {INSTALL}" in run.stdout


def test_ledger_redis_points_the_ledger_at_the_kits_server(ledger_redis: RedisServer) -> None:
    assert ledger_redis.port != FORBIDDEN_PORT
    assert settings.LEDGER["CONNECTION"] == ledger_redis.url
    ledger = get_ledger("default")
    assert ledger.redis.info("server")["process_id"] == ledger_redis.pid


def test_each_block_has_its_own_namespace_deleted_after(ledger_redis_server: RedisServer) -> None:
    client = ledger_redis_server.client()
    with isolated_ledger(ledger_redis_server) as first:
        result = t.add.enqueue(1, 2)
        with isolated_ledger(ledger_redis_server) as second:
            assert second != first
            assert get_ledger("default").resolve(result.id) is None  # not seen from here
        assert get_ledger("default").resolve(result.id) is not None
        assert client.keys(f"{{{first}:*")
    assert client.keys(f"{{{first}:*") == []
    client.close()


@pytest.mark.parametrize("run", range(2))
def test_tests_do_not_see_each_others_tasks(ledger_redis: Any, run: int) -> None:
    assert get_ledger("default").stats().pending == 0
    t.add.enqueue(run, run)
