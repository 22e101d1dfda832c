"""The in-memory dispatch registry's own behaviour, and the registry module's imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from django_ledger.core import dispatch
from django_ledger.core.dispatch import (
    MemoryDispatchRegistry,
)
from tests.dispatch_helpers import FIRE, ROOT, FakeClock

# -- memory only ---------------------------------------------------------------


def test_memory_records_expire_by_the_injected_clock() -> None:
    clock = FakeClock(1_700_000_000.0)
    registry = MemoryDispatchRegistry(ttl=60, clock=clock)
    record = registry.log_dispatch("daily_report", FIRE, "node-1")
    assert record.dispatched_at == datetime.fromtimestamp(1_700_000_000, UTC)
    clock.advance(59.999)
    assert registry.find_dispatch("daily_report", FIRE) == record
    assert registry.history("daily_report") == [record]
    assert not registry.claim_dispatch("daily_report", FIRE, "node-2")
    clock.advance(0.001)
    assert registry.find_dispatch("daily_report", FIRE) is None
    assert registry.history("daily_report") == []
    assert registry.claim_dispatch("daily_report", FIRE, "node-2")


def test_memory_sweeps_expired_records() -> None:
    clock = FakeClock()
    registry = MemoryDispatchRegistry(ttl=10, clock=clock)
    for i in range(100):
        registry.log_dispatch(f"job-{i}", FIRE, "n")
    clock.advance(11)
    registry.log_dispatch("fresh", FIRE, "n")
    assert len(registry._records) == 1
    assert list(registry._indexes) == ["fresh"]


# -- the module ----------------------------------------------------------------


def test_the_module_imports_no_django() -> None:
    tree = ast.parse(Path(dispatch.__file__).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert imported
    assert not {name for name in imported if name.split(".")[0] == "django"}


def test_importing_the_registry_loads_no_django() -> None:
    probe = (
        "import sys, django_ledger.core.dispatch; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_public_names_exist() -> None:
    for name in dispatch.__all__:
        assert hasattr(dispatch, name)
