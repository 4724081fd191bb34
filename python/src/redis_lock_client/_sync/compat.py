# Generated from _async/compat.py by python/scripts/unasync.py: do not edit.
"""A drop-in for redis-py's ``Lock``, backed by the module.

``r.lock("name", lock_class=ModuleLock)`` moves code written for
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

import threading
import uuid
from types import SimpleNamespace, TracebackType
from typing import Any

from redis.exceptions import LockError as RedisLockError
from redis.exceptions import LockNotOwnedError

from .. import _protocol
from .._protocol import Number
from ..errors import NotHeld
from .client import LockClient
from .guard import LockGuard

_CLIENTS = threading.Lock()


def _client_for(redis: Any) -> LockClient:
    """One client per redis-py client, shared by its locks."""
    with _CLIENTS:
        client: LockClient | None = getattr(redis, "_redis_lock_client", None)
        if client is None:
            client = LockClient(redis)
            redis._redis_lock_client = client
        return client


class ModuleLock:
    """redis-py's ``Lock`` interface on ``LOCK.*`` commands."""

    def __init__(
        self,
        redis: Any,
        name: str,
        timeout: Number | None = None,
        sleep: Number = 0.1,
        blocking: bool = True,
        blocking_timeout: Number | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
        **_ignored: Any,
    ) -> None:
        if timeout is not None:
            _protocol.lease_ms(timeout)
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Any = threading.local() if self.thread_local else SimpleNamespace()
        self.local.token = None
        self.local.guard = None
        self._locks = _client_for(redis)

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
        owner = uuid.uuid1().hex if token is None else str(_protocol.text(token))
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        wait: float | None = None
        if not blocking:
            wait = 0.0
        elif blocking_timeout is not None:
            wait = float(blocking_timeout)
        guard = self._locks.as_owner(owner).try_lock(self.name, wait, self.timeout)
        if guard is None:
            return False
        # As with redis-py, a lock object dropped while held stays held until
        # its timeout; only a watchdog-kept one (timeout=None) is released.
        guard.release_on_drop = self.timeout is None
        self.local.token = owner.encode()
        self.local.guard = guard
        return True

    def _guard(self, action: str) -> LockGuard:
        guard: LockGuard | None = getattr(self.local, "guard", None)
        if guard is None:
            raise RedisLockError(f"Cannot {action} an unlocked lock")
        return guard

    def release(self) -> None:
        """Gives the lock back; ``LockNotOwnedError`` if it was lost."""
        guard = self._guard("release")
        self.local.token = None
        self.local.guard = None
        try:
            guard.unlock()
        except NotHeld:
            raise LockNotOwnedError("Cannot release a lock that's no longer owned") from None

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return self._locks.is_locked(self.name)

    def owned(self) -> bool:
        """Whether this lock's token holds it on the server."""
        guard: LockGuard | None = getattr(self.local, "guard", None)
        return guard is not None and guard.is_held()

    def extend(self, additional_time: Number, replace_ttl: bool = False) -> bool:
        """Adds ``additional_time`` seconds to the lease (or sets the lease
        to it with ``replace_ttl``)."""
        guard = self._guard("extend")
        if self.timeout is None:
            raise RedisLockError("Cannot extend a lock with no timeout")
        lease = float(additional_time)
        if not replace_ttl:
            lease += self._locks.remaining_lease(self.name) or 0.0
        return self._renew(guard, lease, "extend")

    def reacquire(self) -> bool:
        """Resets the lease to ``timeout``."""
        guard = self._guard("reacquire")
        if self.timeout is None:
            raise RedisLockError("Cannot reacquire a lock with no timeout")
        return self._renew(guard, float(self.timeout), "reacquire")

    def _renew(self, guard: LockGuard, lease: float, action: str) -> bool:
        if not guard.renew(lease):
            raise LockNotOwnedError(f"Cannot {action} a lock that's no longer owned")
        return True
