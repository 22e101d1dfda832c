"""Kept so that ``django_ledger.dispatch`` goes on working: it lives in ``django_ledger.core.dispatch``."""

from .core.dispatch import *  # noqa: F403
from .core.dispatch import __all__ as __all__
