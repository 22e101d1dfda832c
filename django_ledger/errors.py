"""Kept so that ``django_ledger.errors`` goes on working: it lives in ``django_ledger.core.errors``."""

from .core.errors import *  # noqa: F403
from .core.errors import __all__ as __all__
