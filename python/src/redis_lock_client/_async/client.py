"""The client: :class:`AsyncLockClient`, its calls written once in
``_api.LockApi``; the objects it makes live in a file each."""

from __future__ import annotations

from typing import Any

from .._api import LockApi
from . import _io
from ._io import Later
from .acquire import acquire
from .engine import Engine
from .guard import AsyncLockGuard
from .latch import AsyncCountDownLatch
from .semaphore import AsyncPermitExpirableSemaphore, AsyncSemaphore


class AsyncLockClient(
    LockApi[
        Later[AsyncLockGuard],
        Later[AsyncLockGuard | None],
        Later[bool],
        Later[float | None],
        Later[dict[str, Any]],
    ]
):
    """Locks on the redis-lock module.

    ``AsyncLockClient(redis.asyncio.Redis(...))``, a cluster client (every
    command routes by the lock's name), or a Sentinel-managed master
    (``Sentinel(...).master_for("mymaster")``)::

        locks = AsyncLockClient(redis.asyncio.Redis())
        async with await locks.lock("order:42"):
            ...  # the watchdog keeps the lock until the block ends

    Owner ids are ``<client id>:<n>``, ``n`` the calling thread's number
    (``task-<n>`` for an asyncio task: re-entry per thread or task, as in
    Redisson), or explicit with :meth:`as_owner`. Settings (keyword
    arguments): see :class:`~redis_lock_client.Options` (``watchdog_lease``
    30 s...).
    """

    _Engine = Engine
    _Guard = AsyncLockGuard
    _acquire = staticmethod(acquire)
    _suffix = staticmethod(_io.owner_suffix)

    def semaphore(self, name: str) -> AsyncSemaphore:
        """The semaphore ``name`` (Redisson's ``RSemaphore``, ``LOCK.SEM*``)."""
        return AsyncSemaphore(self._engine, name)

    def permit_semaphore(self, name: str) -> AsyncPermitExpirableSemaphore:
        """The semaphore ``name`` with leased permits (Redisson's
        ``RPermitExpirableSemaphore``, ``LOCK.PERMIT*``), each with an id;
        the watchdog renews those taken without a lease."""
        return AsyncPermitExpirableSemaphore(self._engine, name)

    def count_down_latch(self, name: str) -> AsyncCountDownLatch:
        """The count-down latch ``name`` (Redisson's ``RCountDownLatch``)."""
        return AsyncCountDownLatch(self._engine, name)
