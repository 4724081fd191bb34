"""redis-py's ``Lock`` attributes and argument rules, shared by the two
drop-ins (``ModuleLock``, ``AsyncModuleLock``), which add the calls."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace
from typing import Any

from redis.exceptions import LockError as RedisLockError

from ._protocol import Number, lease_ms, text

_CLIENTS = threading.Lock()


class DropIn:
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
            lease_ms(timeout)
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = raise_on_release_error
        self.local: Any = threading.local() if self.thread_local else SimpleNamespace()
        self.local.token = self.local.guard = None

    @staticmethod
    def _shared(redis: Any, make: Any) -> Any:
        """One client per redis-py client, shared by its locks."""
        with _CLIENTS:
            client = getattr(redis, "_redis_lock_client", None)
            if client is None:
                client = redis._redis_lock_client = make(redis)
            return client

    def _ask(
        self, blocking: bool | None, blocking_timeout: Number | None, token: Any
    ) -> tuple[str, float | None]:
        """(owner, wait) of an ``acquire``: a fresh token unless one is
        given; no wait when not blocking, else ``blocking_timeout`` (None:
        forever)."""
        owner = uuid.uuid1().hex if token is None else str(text(token))
        if not (self.blocking if blocking is None else blocking):
            return owner, 0.0
        wait = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        return owner, None if wait is None else float(wait)

    def _took(self, guard: Any, owner: str) -> bool:
        if guard is None:
            return False
        # As with redis-py, a lock object dropped while held stays held until
        # its timeout; only a watchdog-kept one (timeout=None) is released.
        guard.release_on_drop = self.timeout is None
        self.local.token, self.local.guard = owner.encode(), guard
        return True

    def _guard(self, action: str, *, leased: bool = False) -> Any:
        guard = getattr(self.local, "guard", None)
        if guard is None:
            raise RedisLockError(f"Cannot {action} an unlocked lock")
        if leased and self.timeout is None:
            raise RedisLockError(f"Cannot {action} a lock with no timeout")
        return guard

    def _handed_back(self) -> Any:
        guard = self._guard("release")
        self.local.token = self.local.guard = None
        return guard
