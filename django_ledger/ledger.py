"""Kept so that ``django_ledger.ledger`` goes on working: it lives in ``django_ledger.core.ledger``."""

from .core.ledger import *  # noqa: F403
from .core.ledger import __all__ as __all__
