"""What every check module shares: the tag, and errors with stable ids."""

from __future__ import annotations

from typing import Any

from django.core import checks

__all__ = ["DOCS", "TAG", "error", "safe"]

TAG = "django_ledger"
DOCS = "see docs/checks.md"


def error(id_: int, msg: str, hint: str, obj: str) -> checks.Error:
    """Return the error ``django_ledger.E<id_>``."""
    return checks.Error(msg, hint=hint, obj=obj, id=f"django_ledger.E{id_:03d}")


def safe(spec: Any) -> str:
    """Show a connection spec without a password."""
    if isinstance(spec, str) and "://" in spec and "@" in spec:
        scheme, _, rest = spec.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return repr(spec) if not isinstance(spec, str) else spec
