"""Generated from ``_async/compat.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from redis.exceptions import LockError as RedisLockError
from redis.exceptions import LockNotOwnedError

from .._dropin import DropIn
from .._protocol import Number
from ..errors import NotHeld
from .client import LockClient


class ModuleLock(DropIn):
    """redis-py's ``Lock`` interface on ``LOCK.*`` commands."""

    def __init__(self, redis: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(redis, name, *args, **kwargs)
        self._locks: LockClient = self._shared(redis, LockClient)

    def __enter__(self) -> ModuleLock:
        if self.acquire():
            return self
        raise RedisLockError("Unable to acquire lock within the time specified")

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.release()
        except RedisLockError:
            if self.raise_on_release_error:
                raise

    def acquire(
        self,
        sleep: Number | None = None,
        blocking: bool | None = None,
        blocking_timeout: Number | None = None,
        token: str | bytes | None = None,
    ) -> bool:
        """Takes the lock; True on success. ``blocking=False``: one attempt;
        ``blocking_timeout``: wait at most that long (None: forever)."""
        owner, wait = self._ask(blocking, blocking_timeout, token)
        guard = self._locks.as_owner(owner).try_lock(self.name, wait, self.timeout)
        return self._took(guard, owner)

    def release(self) -> None:
        """Gives the lock back; ``LockNotOwnedError`` if it was lost."""
        try:
            self._handed_back().unlock()
        except NotHeld:
            raise LockNotOwnedError("Cannot release a lock that's no longer owned") from None

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return self._locks.is_locked(self.name)

    def owned(self) -> bool:
        """Whether this lock's token holds it on the server."""
        guard = getattr(self.local, "guard", None)
        return guard is not None and bool(guard.is_held())

    def extend(self, additional_time: Number, replace_ttl: bool = False) -> bool:
        """Adds ``additional_time`` seconds to the lease (or sets the lease
        to it with ``replace_ttl``)."""
        guard = self._guard("extend", leased=True)
        lease = float(additional_time)
        if not replace_ttl:
            lease += self._locks.remaining_lease(self.name) or 0.0
        return self._renew(guard, lease, "extend")

    def reacquire(self) -> bool:
        """Resets the lease to ``timeout``."""
        guard = self._guard("reacquire", leased=True)
        return self._renew(guard, float(self.timeout or 0), "reacquire")

    def _renew(self, guard: Any, lease: float, action: str) -> bool:
        if not guard.renew(lease):
            raise LockNotOwnedError(f"Cannot {action} a lock that's no longer owned")
        return True
