"""Generated from ``_async/client.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from .._api import LockApi
from . import _io
from ._io import Later
from .acquire import acquire
from .engine import Engine
from .guard import LockGuard
from .latch import CountDownLatch
from .semaphore import PermitExpirableSemaphore, Semaphore


class LockClient(
    LockApi[
        Later[LockGuard],
        Later[LockGuard | None],
        Later[bool],
        Later[float | None],
        Later[dict[str, Any]],
    ]
):
    """Locks on the redis-lock module.

    ``LockClient(redis.Redis(...))``, a cluster client (every
    command routes by the lock's name), or a Sentinel-managed master
    (``Sentinel(...).master_for("mymaster")``)::

        locks = LockClient(redis.Redis())
        with locks.lock("order:42"):
            ...  # the watchdog keeps the lock until the block ends

    Owner ids are ``<client id>:<n>``, ``n`` the calling thread's number
    (``task-<n>`` for an asyncio task: re-entry per thread or task, as in
    Redisson), or explicit with :meth:`as_owner`. Settings (keyword
    arguments): see :class:`~redis_lock_client.Options` (``watchdog_lease``
    30 s...).
    """

    _Engine = Engine
    _Guard = LockGuard
    _acquire = staticmethod(acquire)
    _suffix = staticmethod(_io.owner_suffix)

    def semaphore(self, name: str) -> Semaphore:
        """The semaphore ``name`` (Redisson's ``RSemaphore``, ``LOCK.SEM*``)."""
        return Semaphore(self._engine, name)

    def permit_semaphore(self, name: str) -> PermitExpirableSemaphore:
        """The semaphore ``name`` with leased permits (Redisson's
        ``RPermitExpirableSemaphore``, ``LOCK.PERMIT*``), each with an id;
        the watchdog renews those taken without a lease."""
        return PermitExpirableSemaphore(self._engine, name)

    def count_down_latch(self, name: str) -> CountDownLatch:
        """The count-down latch ``name`` (Redisson's ``RCountDownLatch``)."""
        return CountDownLatch(self._engine, name)
