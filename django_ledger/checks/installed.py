"""Checks of ``INSTALLED_APPS``: what the admin and the API need beside the app."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import apps
from django.core import checks

from .base import error as _error

__all__ = ["check_rangefilter"]


def check_rangefilter(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The admin's date-range filters need ``rangefilter`` in ``INSTALLED_APPS``."""
    if apps.is_installed("rangefilter"):
        return []
    return [
        _error(
            40,
            "'rangefilter' is not in INSTALLED_APPS; the ledger admin's date-range filters need it.",
            "Add 'rangefilter' (from django-admin-rangefilter) to INSTALLED_APPS.",
            "INSTALLED_APPS",
        )
    ]
