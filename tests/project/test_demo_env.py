"""The test project's settings: ``REDIS_URL`` from the environment or the demo's env file, never a guess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from testproject.env import demo_dir, read_env_file, redis_url, settings_environment

ROOT = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = (
    "from django.conf import settings; "
    "print(settings.REDIS_URL, settings.LEDGER['CONNECTION'], settings.DATABASES['default']['NAME'])"
)


def settings_of(demo: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Import the settings in a fresh process, with ``demo`` as the demo's folder."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "DATABASE_PATH", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(DEMO_DIR=str(demo), DJANGO_SETTINGS_MODULE="testproject.settings", **extra)
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_redis_url_or_env_file_the_settings_refuse(tmp_path: Path) -> None:
    done = settings_of(tmp_path)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "REDIS_URL is not set" in done.stderr and str(tmp_path / "env") in done.stderr
    assert "6379" not in done.stdout


@pytest.mark.standalone_only(reason="REDIS_CLUSTER replaces the URL connection it checks")
def test_the_demo_env_file_is_read_when_redis_url_is_not_set(tmp_path: Path) -> None:
    (tmp_path / "env").write_text(
        "# written by scripts/demo.sh\n"
        "REDIS_URL=redis://127.0.0.1:6401/0\n"
        f"DATABASE_PATH={tmp_path / 'db.sqlite3'}\n"
    )
    done = settings_of(tmp_path)
    assert done.returncode == 0, done.stderr
    url, connection, database = done.stdout.split()
    assert url == connection == "redis://127.0.0.1:6401/0"
    assert database == str(tmp_path / "db.sqlite3")


@pytest.mark.standalone_only(reason="REDIS_CLUSTER replaces the URL connection it checks")
def test_the_environment_wins_over_the_env_file(tmp_path: Path) -> None:
    (tmp_path / "env").write_text("REDIS_URL=redis://127.0.0.1:6401/0\nDATABASE_PATH=/nowhere\n")
    done = settings_of(tmp_path, REDIS_URL="redis://127.0.0.1:6402/0")
    assert done.returncode == 0, done.stderr
    url, _, database = done.stdout.split()
    # A REDIS_URL of the caller's own: the file, written for another server, is not read.
    assert url == "redis://127.0.0.1:6402/0" and database != "/nowhere"


def test_read_env_file(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text("# a comment\n\nA=1\n B = two words \nC=x=y\n")
    assert read_env_file(path) == {"A": "1", "B": "two words", "C": "x=y"}
    path.write_text("A=1\nnot a pair\n")
    with pytest.raises(ImproperlyConfigured, match="line 2"):
        read_env_file(path)


def test_settings_environment_and_redis_url(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    assert settings_environment({"X": "1"}, env_file) == {"X": "1"}
    env_file.write_text("REDIS_URL=redis://a/0\nX=file\nY=file\n")
    assert settings_environment({"X": "env"}, env_file) == {
        "REDIS_URL": "redis://a/0",
        "X": "env",
        "Y": "file",
    }
    assert settings_environment({"REDIS_URL": "redis://b/0"}, env_file) == {
        "REDIS_URL": "redis://b/0"
    }
    assert redis_url({"REDIS_URL": " redis://b/0 "}, env_file) == "redis://b/0"
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL is not set"):
        redis_url({"REDIS_URL": ""}, env_file)


def test_demo_dir(tmp_path: Path) -> None:
    assert demo_dir(tmp_path, {}) == tmp_path / ".demo"
    assert demo_dir(tmp_path, {"DEMO_DIR": "/elsewhere"}) == Path("/elsewhere")
