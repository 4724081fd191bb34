"""A drop-in for redis-py's ``Lock``, backed by the module.

``r.lock("name", lock_class=AsyncModuleLock)`` moves code written for
redis-py's lock over with one argument: the same methods, arguments and
exceptions (``redis.exceptions.LockError``, ``LockNotOwnedError``), and
underneath:

* waiting in the server's FIFO queue (``LOCK.ACQUIRE ... WAIT``) instead of
  polling every ``sleep`` seconds (``sleep`` is accepted and unused);
* ``timeout=None`` (redis-py's "never expires") is a lock kept by the
  client's watchdog: it still frees itself a lease after its holder died;
* retries that never take or release twice.

Like redis-py's lock, each ``acquire()`` uses a fresh token (the owner id),
unless one is given, so a second ``acquire()`` waits rather than re-enters.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from redis.exceptions import LockError as RedisLockError
from redis.exceptions import LockNotOwnedError

from .._dropin import DropIn
from .._protocol import Number
from ..errors import NotHeld
from .client import AsyncLockClient


class AsyncModuleLock(DropIn):
    """redis-py's ``Lock`` interface on ``LOCK.*`` commands."""

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(redis, name, *args, **kwargs)
        self._locks: AsyncLockClient = self._shared(redis, AsyncLockClient)

    async def __aenter__(self) -> AsyncModuleLock:
        if await self.acquire():
            return self
        raise RedisLockError("Unable to acquire lock within the time specified")

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.release()
        except RedisLockError:
            if self.raise_on_release_error:
                raise

    async def acquire(
        self,
        # sync: sleep: Number | None = None,
        blocking: bool | None = None,
        blocking_timeout: Number | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Takes the lock; True on success. ``blocking=False``: one attempt;
        ``blocking_timeout``: wait at most that long (None: forever)."""
        owner, wait = self._ask(blocking, blocking_timeout, token)
        guard = await self._locks.as_owner(owner).try_lock(self.name, wait, self.timeout)
        return self._took(guard, owner)

    async def release(self) -> None:
        """Gives the lock back; ``LockNotOwnedError`` if it was lost."""
        try:
            await self._handed_back().unlock()
        except NotHeld:
            raise LockNotOwnedError("Cannot release a lock that's no longer owned") from None

    async def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return await self._locks.is_locked(self.name)

    async def owned(self) -> bool:
        """Whether this lock's token holds it on the server."""
        guard = getattr(self.local, "guard", None)
        return guard is not None and bool(await guard.is_held())

    async def extend(self, additional_time: Number, replace_ttl: bool = False) -> bool:
        """Adds ``additional_time`` seconds to the lease (or sets the lease
        to it with ``replace_ttl``)."""
        guard = self._guard("extend", leased=True)
        lease = float(additional_time)
        if not replace_ttl:
            lease += await self._locks.remaining_lease(self.name) or 0.0
        return await self._renew(guard, lease, "extend")

    async def reacquire(self) -> bool:
        """Resets the lease to ``timeout``."""
        guard = self._guard("reacquire", leased=True)
        return await self._renew(guard, float(self.timeout or 0), "reacquire")

    async def _renew(self, guard: Any, lease: float, action: str) -> bool:
        if not await guard.renew(lease):
            raise LockNotOwnedError(f"Cannot {action} a lock that's no longer owned")
        return True
