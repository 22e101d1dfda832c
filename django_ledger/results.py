"""Kept so that ``django_ledger.results`` goes on working: it lives in ``django_ledger.core.results``."""

from .core.results import *  # noqa: F403
from .core.results import __all__ as __all__
