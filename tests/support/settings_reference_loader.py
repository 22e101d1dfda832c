"""Load scripts/settings_reference.py (a script, not a module of a package) for the tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def settings_reference() -> ModuleType:
    path = ROOT / "scripts" / "settings_reference.py"
    spec = importlib.util.spec_from_file_location("settings_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
