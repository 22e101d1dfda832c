"""Where the test project's settings come from: the environment, or the demo's env file.

``scripts/demo.sh`` writes ``.demo/env`` (``KEY=value`` lines) while the demo runs and
removes it when the demo stops, so ``manage.py`` run from another terminal reaches the
demo's Redis and database with no variable to export. The environment always wins, and
nothing falls back to a Redis that nobody configured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

__all__ = ["demo_dir", "read_env_file", "redis_url", "settings_environment"]


def demo_dir(base_dir: Path, environ: Mapping[str, str]) -> Path:
    """Return the demo's folder: ``$DEMO_DIR``, else ``.demo`` in the project root."""
    return Path(environ.get("DEMO_DIR") or base_dir / ".demo")


def read_env_file(path: Path) -> dict[str, str]:
    """Return the ``KEY=value`` lines of ``path`` (blank lines and ``#`` comments skipped)."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ImproperlyConfigured(f"{path}, line {number}: expected KEY=value, got {line!r}")
        values[key.strip()] = value.strip()
    return values


def settings_environment(environ: Mapping[str, str], env_file: Path) -> dict[str, str]:
    """Return the variables the settings read.

    With ``REDIS_URL`` in ``environ``, that is ``environ`` alone: the caller chose a
    server, and no file changes it (the test suite sets ``REDIS_URL`` this way). Without
    it, ``env_file``'s values when the file exists, each overridden by ``environ``.
    """
    if environ.get("REDIS_URL") or not env_file.is_file():
        return dict(environ)
    return {**read_env_file(env_file), **environ}


def redis_url(env: Mapping[str, str], env_file: Path) -> str:
    """Return ``REDIS_URL``, or raise ``ImproperlyConfigured`` saying how to set it."""
    url = env.get("REDIS_URL", "").strip()
    if url:
        return url
    raise ImproperlyConfigured(
        f"REDIS_URL is not set and {env_file} does not exist: the test project has no "
        "Redis to use, and never guesses one. Start the demo (bash scripts/demo.sh writes "
        "that file while it runs), or set REDIS_URL, e.g. "
        "REDIS_URL=redis://127.0.0.1:6390/0 python manage.py shell"
    )


def environment(base_dir: Path) -> tuple[dict[str, str], Path]:
    """Return the settings' variables and the env file they may have come from."""
    env_file = demo_dir(base_dir, os.environ) / "env"
    return settings_environment(os.environ, env_file), env_file
