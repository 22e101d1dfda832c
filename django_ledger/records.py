"""Kept so that ``django_ledger.records`` goes on working: it lives in ``django_ledger.core.records``."""

from .core.records import *  # noqa: F403
from .core.records import __all__ as __all__
