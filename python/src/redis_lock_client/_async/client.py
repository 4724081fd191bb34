"""The client: :class:`AsyncLockClient`, its owner ids and its API; the
objects it makes live in a file each."""

from __future__ import annotations

from typing import Any

from .. import _protocol
from .._api import LockApi, Lost
from .._protocol import Kind, Number, Options
from . import _io
from ._io import Later
from .acquire import acquire
from .engine import Engine
from .guard import AsyncLockGuard
from .latch import AsyncCountDownLatch
from .semaphore import AsyncPermitExpirableSemaphore, AsyncSemaphore


class AsyncLockClient(LockApi[Later[AsyncLockGuard], Later[AsyncLockGuard | None]]):
    """Locks on the redis-lock module.

    ``AsyncLockClient(redis.asyncio.Redis(...))``, a cluster client (every
    command routes by the lock's name), or a Sentinel-managed master
    (``Sentinel(...).master_for("mymaster")``)::

        locks = AsyncLockClient(redis.asyncio.Redis())
        async with await locks.lock("order:42"):
            ...  # the watchdog keeps the lock until the block ends

    Owner ids are ``<client id>:<n>``, ``n`` the calling thread's number
    (``task-<n>`` for an asyncio task: re-entry per thread or task, as in
    Redisson), or explicit with :meth:`as_owner`. Settings: see
    :class:`~redis_lock_client.Options` (``watchdog_lease`` 30 s...).
    """

    def __init__(
        self,
        client: Any,
        *,
        watchdog_lease: Number = 30.0,
        command_timeout: Number | None = None,
        retries: int = 3,
        retry_interval: Number = 0.1,
        wait_margin: Number = 2.0,
        sync_replicas: tuple[int, Number] | None = None,
        track_locks: bool = True,
    ) -> None:
        _protocol.lease_ms(watchdog_lease)
        options = Options(
            float(watchdog_lease),
            None if command_timeout is None else float(command_timeout),
            retries,
            float(retry_interval),
            float(wait_margin),
            None if sync_replicas is None else (int(sync_replicas[0]), float(sync_replicas[1])),
            track_locks,
        )
        options.sync_args()
        self._engine = Engine(client, options)
        self._owner: str | None = None

    _suffix = staticmethod(_io.owner_suffix)

    async def _take(
        self,
        name: str,
        lease: Number | None,
        wait: Number | None,
        fenced: bool,
        on_lost: Lost,
        kind: Kind,
    ) -> AsyncLockGuard | None:
        w = None if wait is None else float(wait)
        guard: AsyncLockGuard | None = await acquire(
            self._engine, name, self.owner, lease, w, fenced, on_lost, AsyncLockGuard, kind
        )
        return guard

    async def _must(self, name: str, fenced: bool, on_lost: Lost, kind: Kind) -> AsyncLockGuard:
        guard = await self._take(name, None, None, fenced, on_lost, kind)
        assert guard is not None  # a wait without end ends with the lock
        return guard

    def as_owner(self, owner: str) -> AsyncLockClient:
        view: AsyncLockClient = super().as_owner(owner)
        return view

    # -- about any lock ------------------------------------------------------

    async def is_locked(self, name: str) -> bool:
        """Whether anyone holds the lock."""
        return bool(await self._engine.counted.simple(name, ["EXISTS", name]))

    async def remaining_lease(self, name: str) -> float | None:
        """The lock's remaining lease in seconds, whoever holds it; None if free."""
        ms = await self._engine.counted.simple(name, ["PTTL", name])
        return ms / 1000.0 if isinstance(ms, int) and ms >= 0 else None

    async def force_unlock(self, name: str) -> bool:
        """Deletes the lock whoever holds it (``LOCK.FORCE``): an operator's
        tool; the holder is told within milliseconds (tracking) or at its
        next renewal. True if a lock existed."""
        return bool(await self._engine.counted.simple(name, ["LOCK.FORCE", name]) == 1)

    async def info(self, name: str) -> dict[str, Any]:
        """``LOCK.INFO``: state, owners, ttl_ms, deadline_ms, waiters, token."""
        return _protocol.pairs(await self._engine.counted.simple(name, ["LOCK.INFO", name]))

    async def send(
        self, name: str, args: list[Any], timeout: Number | None = None, retries: int | None = None
    ) -> Any:
        """Sends a command that is safe to resend, routed by ``name``, with
        this client's retries (``retries=0``: one attempt) and reply timeout."""
        t = None if timeout is None else float(timeout)
        return await self._engine.counted.simple(name, args, t, retries)

    # -- semaphores and latches ----------------------------------------------

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
