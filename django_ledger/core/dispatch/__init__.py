"""The dispatch registry: which node dispatched which cron fire, for a while.

``RedisDispatchRegistry`` is the port of Kaal's Redis engine; ``MemoryDispatchRegistry``
is its in-memory twin. Neither imports Django: the Django layer builds the configured
one from settings (``django_ledger.get_dispatch_registry``).
"""

from .base import CorruptDispatch, Dispatch, DispatchRegistry, DispatchUnavailable, FireTime
from .memory import MemoryDispatchRegistry
from .redis_engine import RedisDispatchRegistry

__all__ = [
    "CorruptDispatch",
    "Dispatch",
    "DispatchRegistry",
    "DispatchUnavailable",
    "FireTime",
    "MemoryDispatchRegistry",
    "RedisDispatchRegistry",
]
