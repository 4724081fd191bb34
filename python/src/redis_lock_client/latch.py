"""The count-down latch on the redis-lock module (Redisson's
``RCountDownLatch``, ``LOCK.LATCH*`` and ``LOCK.AWAIT``): threads, and
:class:`AsyncCountDownLatch` for asyncio.

::

    latch = locks.count_down_latch("batch")
    latch.try_set_count(3)
    ...  # three workers call latch.count_down()
    if latch.wait_zero(timeout=10) is LatchResult.REACHED:
        ...

The wait is server-side (``LOCK.AWAIT``) on a connection of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core
from ._core import LatchResult, Number
from .errors import ProtocolViolation

if TYPE_CHECKING:
    from ._async import AsyncLockClient
    from ._sync import LockClient


def _decode(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except _core.ProtocolError as e:
        raise ProtocolViolation(str(e)) from e


class CountDownLatch:
    """Redisson's ``RCountDownLatch``: ``LockClient.count_down_latch(name)``.
    The latch is open (waits end) when its count reaches zero, when it is
    deleted, or when it never existed."""

    def __init__(self, client: LockClient, name: str) -> None:
        self._client = client
        self.name = name

    def try_set_count(self, count: int, ttl: Number | None = None) -> bool:
        """Sets the count (>= 1) if the latch does not exist; False if it
        does. With ``ttl`` s the latch expires: waiters get
        :attr:`LatchResult.EXPIRED`."""
        args = _core.latch_set_args(self.name, count, ttl)
        return bool(_decode(_core.flag, args[0], self._client._once(self.name, args)))

    def count_down(self) -> int:
        """One less; the count left (0: open, waiters told)."""
        reply = self._client._once(self.name, ["LOCK.COUNTDOWN", self.name])
        return int(_decode(_core.integer, "LOCK.COUNTDOWN", reply))

    def count(self) -> int:
        """The count (0 when the latch does not exist)."""
        reply = self._client._simple(self.name, ["LOCK.LATCHCOUNT", self.name])
        return int(_decode(_core.integer, "LOCK.LATCHCOUNT", reply))

    def wait_zero(self, timeout: Number | None = None) -> LatchResult:
        """Waits (server-side) until the count is zero, at most ``timeout``
        s (None: forever): :attr:`~LatchResult.REACHED`,
        :attr:`~LatchResult.TIMED_OUT` or :attr:`~LatchResult.EXPIRED` (the
        latch's ttl ended first). Redisson's ``await``."""
        args = _core.await_args(self.name, timeout)
        within = None if timeout is None else float(timeout)
        reply = self._client._once(self.name, args, True, within)
        return LatchResult(_decode(_core.latch_result, reply))

    def info(self) -> dict[str, Any]:
        """``LOCK.LATCHINFO``: ``count``, ``ttl_ms``, ``waiters`` (dicts
        ``waited_ms``, ``timeout_ms``)."""
        reply = self._client._simple(self.name, ["LOCK.LATCHINFO", self.name])
        return dict(_decode(_core.latch_info, reply))

    def __repr__(self) -> str:
        return f"CountDownLatch({self.name!r})"


class AsyncCountDownLatch:
    """:class:`CountDownLatch` for asyncio:
    ``AsyncLockClient.count_down_latch(name)``."""

    def __init__(self, client: AsyncLockClient, name: str) -> None:
        self._client = client
        self.name = name

    async def try_set_count(self, count: int, ttl: Number | None = None) -> bool:
        """Sets the count if the latch does not exist (see :meth:`CountDownLatch.try_set_count`)."""
        args = _core.latch_set_args(self.name, count, ttl)
        return bool(_decode(_core.flag, args[0], await self._client._once(self.name, args)))

    async def count_down(self) -> int:
        """One less; the count left."""
        reply = await self._client._once(self.name, ["LOCK.COUNTDOWN", self.name])
        return int(_decode(_core.integer, "LOCK.COUNTDOWN", reply))

    async def count(self) -> int:
        """The count (0 when the latch does not exist)."""
        reply = await self._client._simple(self.name, ["LOCK.LATCHCOUNT", self.name])
        return int(_decode(_core.integer, "LOCK.LATCHCOUNT", reply))

    async def wait_zero(self, timeout: Number | None = None) -> LatchResult:
        """Waits until the count is zero (see :meth:`CountDownLatch.wait_zero`);
        a cancelled wait closes its connection."""
        args = _core.await_args(self.name, timeout)
        within = None if timeout is None else float(timeout)
        reply = await self._client._once(self.name, args, True, within)
        return LatchResult(_decode(_core.latch_result, reply))

    async def info(self) -> dict[str, Any]:
        """``LOCK.LATCHINFO`` (see :meth:`CountDownLatch.info`)."""
        reply = await self._client._simple(self.name, ["LOCK.LATCHINFO", self.name])
        return dict(_decode(_core.latch_info, reply))

    def __repr__(self) -> str:
        return f"AsyncCountDownLatch({self.name!r})"
