"""Locks over several locks or several servers.

* :class:`AsyncMultiLock`: all of several locks or none (Redisson's
  ``RedissonMultiLock``), possibly on independent servers.
* :class:`AsyncRedLock`: one lock on a majority of independent masters
  (Redisson's deprecated ``RedissonRedLock``). Its safety rests on bounded
  clock drift and pauses, and it has no fencing token: prefer
  ``lock_fenced`` on a replicated master.
"""

from __future__ import annotations

import contextlib
import functools
import random

from .. import _protocol
from .._api import MultiHeld, MultiParts, RedLockPlan, RedLockView
from .._holds import monotonic
from .._protocol import Number
from ..errors import LockError
from . import _io
from ._io import Later
from .client import AsyncLockClient
from .guard import AsyncLockGuard, Releasing


async def _roll_back(held: list[AsyncLockGuard]) -> None:
    with contextlib.suppress(LockError):
        await AsyncMultiGuard(held[::-1]).unlock()


class AsyncMultiGuard(MultiHeld, Releasing):
    """The locks of an :class:`AsyncMultiLock`, released together (at the
    end of an ``async with`` block: the first error, unless the block raised)."""

    _released = False
    _quiet = LockError

    async def unlock(self) -> None:
        """Releases every lock (all are attempted); raises the first error."""
        first: LockError | None = None
        for guard in self.guards:
            try:
                await guard.unlock()
            except LockError as e:
                first = first or e
        if first is not None:
            raise first

    _give_back = unlock


class AsyncMultiLock(MultiParts[Later[AsyncMultiGuard], Later[AsyncMultiGuard | None]]):
    async def _acquire(self, wait: float | None, lease: Number | None) -> AsyncMultiGuard | None:
        deadline = None if wait is None else monotonic() + wait
        held: list[AsyncLockGuard] = []
        try:
            for client, name in self._parts:
                part_wait = None if deadline is None else max(0.0, deadline - monotonic())
                guard = await client.try_lock(name, part_wait, lease)
                if guard is None:
                    await _roll_back(held)
                    return None
                held.append(guard)
            if lease is not None and len(held) > 1:
                # The first lease started long before the last: restart all.
                for guard in held:
                    if not await guard.renew(lease):
                        await _roll_back(held)
                        return None
        except BaseException:
            await _roll_back(held)
            raise
        return AsyncMultiGuard(held)


class AsyncRedLock(RedLockPlan):
    async def try_lock(self, wait: Number, lease: Number) -> AsyncRedLockGuard | None:
        """The lock on a quorum within ``wait`` s for ``lease`` s, or None."""
        ms = _protocol.lease_ms(lease)
        lease = float(lease)
        budget_end = monotonic() + float(wait)
        per_master = min(max(lease / 10, 0.005), self._timeout())
        drift = lease / 100 + 0.002
        while True:
            owner = self._round()
            started = monotonic()
            args = ["LOCK.ACQUIRE", self.name, owner, ms]

            async def attempt(master: AsyncLockClient, args: list[object] = args) -> bool:
                return await master.send(self.name, args, per_master, retries=0) is None

            calls = [functools.partial(attempt, m) for m in self._masters]
            granted = (await _io.at_once(calls, per_master)).count(True)
            validity = lease - (monotonic() - started) - drift
            guard = AsyncRedLockGuard(self._masters, self.name, owner, started + validity)
            if granted >= self.quorum and validity > 0:
                return guard
            await guard.unlock()
            left = budget_end - monotonic()
            if left <= 0:
                return None
            await _io.sleep(min(left, random.uniform(0.01, 0.05)))


class AsyncRedLockGuard(RedLockView, Releasing):
    async def unlock(self) -> None:
        """Releases it on every master, reachable or not (errors ignored: an
        unreachable master's hold ends with its lease)."""
        args = ["LOCK.RELEASE", self.name, self.owner]
        calls = [functools.partial(m.send, self.name, args, retries=0) for m in self._masters]
        await _io.at_once(calls, self._timeout())

    _released = False
    _give_back = unlock
