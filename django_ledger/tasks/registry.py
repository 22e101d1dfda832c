"""The paths of the tasks this process declared (for the admin's filter by task).

Free of Django's task framework: the admin imports it on any Django version.
"""

from __future__ import annotations

__all__ = ["declare", "declared_paths"]

_paths: set[str] = set()


def declare(path: str) -> None:
    """Remember that task ``path`` was declared (``LedgerTask`` calls it)."""
    _paths.add(path)


def declared_paths() -> list[str]:
    """Return the declared task paths, sorted."""
    return sorted(_paths)
