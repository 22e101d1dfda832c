"""Fixtures of the worker's process tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from django_ledger.core.worker.health import STALL_FILE_ENV


@pytest.fixture
def stall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file that, while it exists, holds the loop of the workers started after."""
    path = tmp_path / "stall"
    monkeypatch.setenv(STALL_FILE_ENV, str(path))
    return path
