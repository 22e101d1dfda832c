"""Every module of the package reads in one sitting: at most ``MAX_LINES`` lines.

A module that grows past it splits by what its parts do (as ``admin/schedule_rows.py``
left ``admin/schedules.py``), so "where is X" stays a question of one file.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 450


def long_modules(package: Path) -> list[str]:
    """The modules under ``package`` longer than ``MAX_LINES``, with their lengths."""
    found = []
    for module in sorted(package.rglob("*.py")):
        lines = len(module.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{module.relative_to(package).as_posix()}: {lines} lines")
    return found


def test_every_module_is_at_most_450_lines() -> None:
    assert long_modules(ROOT / "django_ledger") == []


def test_the_count_names_a_module_one_line_too_long(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert long_modules(tmp_path) == [f"sub/long.py: {MAX_LINES + 1} lines"]
