"""Generated from ``_async/latch.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from .. import _protocol
from .._protocol import LatchResult, Number
from .engine import Engine
from .waiting import wait_once


class CountDownLatch:
    """Redisson's ``RCountDownLatch``: ``locks.count_down_latch(name)``.
    The latch is open (waits end) when its count reaches zero, when it is
    deleted, or when it never existed."""

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self.name = name

    def try_set_count(self, count: int, ttl: Number | None = None) -> bool:
        """Sets the count (>= 1) if the latch does not exist; False if it
        does. With ``ttl`` s the latch expires: waiters get
        :attr:`LatchResult.EXPIRED`."""
        args = _protocol.latch_set_args(self.name, count, ttl)
        return _protocol.flag(args[0], self._engine.counted.simple(self.name, args, once=True))

    def count_down(self) -> int:
        """One less; the count left (0: open, waiters told)."""
        reply = self._engine.counted.simple(self.name, ["LOCK.COUNTDOWN", self.name], once=True)
        return _protocol.integer("LOCK.COUNTDOWN", reply)

    def count(self) -> int:
        """The count (0 when the latch does not exist)."""
        reply = self._engine.counted.simple(self.name, ["LOCK.LATCHCOUNT", self.name])
        return _protocol.integer("LOCK.LATCHCOUNT", reply)

    def wait_zero(self, timeout: Number | None = None) -> LatchResult:
        """Waits (server-side) until the count is zero, at most ``timeout``
        s (None: forever): :attr:`~LatchResult.REACHED`,
        :attr:`~LatchResult.TIMED_OUT` or :attr:`~LatchResult.EXPIRED` (the
        latch's ttl ended first). Redisson's ``await``."""
        args = _protocol.await_args(self.name, timeout)
        within = None if timeout is None else float(timeout)
        return _protocol.latch_result(wait_once(self._engine, self.name, args, within))

    def info(self) -> dict[str, Any]:
        """``LOCK.LATCHINFO``: ``count``, ``ttl_ms``, ``waiters`` (dicts
        ``waited_ms``, ``timeout_ms``)."""
        reply = self._engine.counted.simple(self.name, ["LOCK.LATCHINFO", self.name])
        return _protocol.latch_info(reply)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
