"""Redisson-grade locks for redis-py, on the redis-lock module (``LOCK.*``).

Three lines::

    locks = redis_lock_client.LockClient(redis.Redis())
    with locks.lock("order:42"):
        ...  # waits in the server's FIFO queue; the watchdog keeps the lock

* :class:`LockClient` (threads) and :class:`AsyncLockClient` (asyncio, on
  ``redis.asyncio``): ``lock``, ``try_lock(name, wait, lease)``,
  ``lock_fenced``, ``try_lock_fenced``, ``is_locked``, ``remaining_lease``,
  ``force_unlock``, ``as_owner``; the read-write lock: ``read_lock``,
  ``write_lock``, ``try_read_lock``, ``try_write_lock``,
  ``write_lock_fenced``, ``try_write_lock_fenced``.
* Guards release on leaving a ``with`` block; ``guard.lost`` is an Event set
  when the lock is lost (``guard.lost_reason`` says why).
* :class:`ModuleLock`: redis-py's ``Lock`` interface on the module,
  ``r.lock("name", lock_class=ModuleLock)``; :class:`AsyncModuleLock` for
  ``redis.asyncio``.
* Semaphores and a latch (Redisson's ``RSemaphore``,
  ``RPermitExpirableSemaphore``, ``RCountDownLatch``):
  ``locks.semaphore(name)`` (:class:`Semaphore`),
  ``locks.permit_semaphore(name)`` (:class:`PermitExpirableSemaphore`, whose
  :class:`Permits` the watchdog keeps), ``locks.count_down_latch(name)``
  (:class:`CountDownLatch`, ``wait_zero`` -> :class:`LatchResult`); ``Async*``
  for asyncio.
* :class:`MultiLock` and :class:`RedLock` over several locks or servers
  (:class:`AsyncMultiLock` and :class:`AsyncRedLock` for asyncio).
"""

from ._async import AsyncLockClient, AsyncLockGuard
from ._core import LatchResult, LostReason, Options
from ._sync import LockClient, LockGuard
from .compat import AsyncModuleLock, ModuleLock
from .errors import (
    ConnectionLost,
    HoldCountMismatch,
    LockError,
    NotHeld,
    NotSynced,
    OutcomeUnknown,
    PermitsNotHeld,
    ProtocolViolation,
    ServerError,
    Uncertain,
    UpgradeRefused,
)
from .latch import AsyncCountDownLatch, CountDownLatch
from .multi import (
    AsyncMultiGuard,
    AsyncMultiLock,
    AsyncRedLock,
    AsyncRedLockGuard,
    MultiGuard,
    MultiLock,
    RedLock,
    RedLockGuard,
)
from .semaphore import (
    AsyncPermitExpirableSemaphore,
    AsyncPermits,
    AsyncSemaphore,
    PermitExpirableSemaphore,
    Permits,
    Semaphore,
)

__all__ = [
    "AsyncCountDownLatch",
    "AsyncLockClient",
    "AsyncLockGuard",
    "AsyncModuleLock",
    "AsyncMultiGuard",
    "AsyncMultiLock",
    "AsyncPermitExpirableSemaphore",
    "AsyncPermits",
    "AsyncRedLock",
    "AsyncRedLockGuard",
    "AsyncSemaphore",
    "ConnectionLost",
    "CountDownLatch",
    "HoldCountMismatch",
    "LatchResult",
    "LockClient",
    "LockError",
    "LockGuard",
    "LostReason",
    "ModuleLock",
    "MultiGuard",
    "MultiLock",
    "NotHeld",
    "NotSynced",
    "Options",
    "OutcomeUnknown",
    "PermitExpirableSemaphore",
    "Permits",
    "PermitsNotHeld",
    "ProtocolViolation",
    "RedLock",
    "RedLockGuard",
    "Semaphore",
    "ServerError",
    "Uncertain",
    "UpgradeRefused",
]
