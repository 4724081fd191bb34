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
  ``locks.semaphore(name)``, ``locks.permit_semaphore(name)`` (whose
  :class:`Permits` the watchdog keeps), ``locks.count_down_latch(name)``
  (``wait_zero`` -> :class:`LatchResult`); ``Async*`` for asyncio.
* :class:`MultiLock` and :class:`RedLock` over several locks or servers.
* Every error is a ``redis.exceptions.LockError`` (a ``RedisError``).
"""

from importlib.metadata import PackageNotFoundError, version

from ._async.client import AsyncLockClient
from ._async.compat import AsyncModuleLock
from ._async.guard import AsyncLockGuard
from ._async.latch import AsyncCountDownLatch
from ._async.multi import AsyncMultiGuard, AsyncMultiLock, AsyncRedLock, AsyncRedLockGuard
from ._async.semaphore import AsyncPermitExpirableSemaphore, AsyncPermits, AsyncSemaphore
from ._protocol import LatchResult, LostReason, Options
from ._sync.client import LockClient
from ._sync.compat import ModuleLock
from ._sync.guard import LockGuard
from ._sync.latch import CountDownLatch
from ._sync.multi import MultiGuard, MultiLock, RedLock, RedLockGuard
from ._sync.semaphore import PermitExpirableSemaphore, Permits, Semaphore
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

try:
    __version__ = version("redis-lock-client")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

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
    "__version__",
]
