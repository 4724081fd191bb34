"""Locks over several locks or several servers (threads, and ``Async*``
for asyncio).

* :class:`MultiLock`: all of several locks or none (Redisson's
  ``RedissonMultiLock``), possibly on independent servers.
* :class:`RedLock`: one lock on a majority of independent masters (Redisson's
  deprecated ``RedissonRedLock``). Its safety rests on bounded clock drift
  and pauses, and it has no fencing token: prefer ``lock_fenced`` on a
  replicated master (see the README's "Which lock?").
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType

from . import _core
from ._async import AsyncLockClient, AsyncLockGuard
from ._core import LostReason, Number
from ._sync import LockClient, LockGuard
from .errors import LockError


class MultiLock:
    """All of several locks, or none: taken in the order given within one
    shared wait budget; if one cannot be had, those already taken are
    released before the call returns. List the locks in the same order
    everywhere (opposite orders can each hold one and wait for the other).

    ::

        both = MultiLock([(east, "account:1"), (west, "account:2")])
        with both.try_lock(wait=1.0) as guard:  # raises if not had in time
            ...
    """

    def __init__(self, parts: Iterable[tuple[LockClient, str]]) -> None:
        self._parts = list(parts)
        if not self._parts:
            raise ValueError("a MultiLock needs at least one lock")

    def lock(self) -> MultiGuard:
        """Takes every lock, waiting as long as it takes; watchdogs keep them."""
        guard = self._acquire(None, None)
        assert guard is not None
        return guard

    def try_lock(self, wait: Number = 0, lease: Number | None = None) -> MultiGuard | None:
        """Every lock within ``wait`` seconds (shared), or None. With a
        ``lease``, every lease restarts together once all are held."""
        return self._acquire(float(wait), lease)

    def _acquire(self, wait: float | None, lease: Number | None) -> MultiGuard | None:
        deadline = None if wait is None else _core.monotonic() + wait
        held: list[LockGuard] = []
        try:
            for client, name in self._parts:
                part_wait = None if deadline is None else max(0.0, deadline - _core.monotonic())
                guard = client._acquire(name, client.owner, lease, part_wait, False, None)
                if guard is None:
                    _roll_back(held)
                    return None
                held.append(guard)
            if lease is not None and len(held) > 1:
                # The first lease started long before the last: restart all.
                for guard in held:
                    if not _restart(guard, float(lease)):
                        _roll_back(held)
                        return None
        except BaseException:
            _roll_back(held)
            raise
        return MultiGuard(held)


def _restart(guard: LockGuard, lease: float) -> bool:
    sent = _core.monotonic()
    reply = guard._client._simple(
        guard.name, ["LOCK.RENEW", guard.name, guard.owner, _core.lease_ms(lease)]
    )
    if reply != 1:
        return False
    with guard._entry.mutex:
        guard._entry.state.expires = sent + lease
    return True


def _roll_back(held: list[LockGuard]) -> None:
    for guard in reversed(held):
        try:
            guard.unlock()
        except LockError:
            pass


class MultiGuard:
    """The locks of a :class:`MultiLock`, released together."""

    def __init__(self, guards: list[LockGuard]) -> None:
        self.guards = guards

    def lost_reason(self) -> tuple[int, LostReason] | None:
        """The index of a lock known lost and why, or None."""
        for i, guard in enumerate(self.guards):
            why = guard.lost_reason
            if why is not None:
                return i, why
        return None

    def unlock(self) -> None:
        """Releases every lock (all are attempted); raises the first error."""
        first: LockError | None = None
        for guard in self.guards:
            try:
                guard.unlock()
            except LockError as e:
                first = first or e
        if first is not None:
            raise first

    def __enter__(self) -> MultiGuard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.unlock()
        except LockError:
            if et is None:
                raise


_rounds = itertools.count(1)


class RedLock:
    """One lock on a majority (N/2 + 1) of N independent masters.

    Each round sends one ``LOCK.ACQUIRE`` (no waiting) to every master, each
    bounded by a short timeout; it wins when a quorum granted it and time is
    left: validity = lease - elapsed - drift (1% of the lease + 2 ms). A lost
    round is released on every master, and the next starts after a short
    random pause until ``wait`` is spent. Each round uses a fresh owner id
    and never resends, so releasing it everywhere never frees another
    holder's lock: no re-entry, no watchdog (pick a lease longer than the
    work), no fencing token.
    """

    def __init__(self, masters: list[LockClient], name: str) -> None:
        if not masters:
            raise ValueError("a RedLock needs at least one master")
        self._masters = list(masters)
        self.name = name

    @property
    def quorum(self) -> int:
        return len(self._masters) // 2 + 1

    def try_lock(self, wait: Number, lease: Number) -> RedLockGuard | None:
        """The lock on a quorum within ``wait`` s for ``lease`` s, or None."""
        ms = _core.lease_ms(lease)
        lease = float(lease)
        budget_end = _core.monotonic() + float(wait)
        per_master = min(
            max(lease / 10, 0.005), _core.short_timeout(self._masters[0].options.command_timeout)
        )
        drift = lease / 100 + 0.002
        while True:
            owner = f"{self._masters[0].id}:redlock-{next(_rounds)}"
            started = _core.monotonic()
            results: list[bool] = [False] * len(self._masters)

            def attempt(
                i: int, master: LockClient, owner: str = owner, results: list[bool] = results
            ) -> None:
                try:
                    reply = master._simple(
                        self.name,
                        ["LOCK.ACQUIRE", self.name, owner, ms],
                        timeout=per_master,
                        retries=0,
                    )
                    results[i] = reply is None
                except LockError:
                    pass

            _each(self._masters, attempt, started + per_master)
            validity = lease - (_core.monotonic() - started) - drift
            guard = RedLockGuard(self._masters, self.name, owner, started + validity)
            if sum(results) >= self.quorum and validity > 0:
                return guard
            guard.unlock()
            left = budget_end - _core.monotonic()
            if left <= 0:
                return None
            time.sleep(min(left, random.uniform(0.01, 0.05)))


def _each(
    masters: list[LockClient], call: Callable[[int, LockClient], None], deadline: float
) -> None:
    """``call(i, master)`` for every master at once, waiting until
    ``deadline`` at most: a master slow to connect or answer is left behind
    (a grant it makes late ends with its lease, and is released by the
    release sent to every master)."""
    threads = [
        threading.Thread(target=call, args=(i, m), daemon=True) for i, m in enumerate(masters)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - _core.monotonic()))


class RedLockGuard:
    """A :class:`RedLock` held on a quorum, valid for :meth:`validity` more
    seconds; released on every master by :meth:`unlock` or the ``with``
    block's end."""

    def __init__(
        self, masters: list[LockClient], name: str, owner: str, valid_until: float
    ) -> None:
        self._masters = masters
        self.name = name
        self.owner = owner
        self._valid_until = valid_until

    def validity(self) -> float:
        """Seconds the lock is still valid (0 when it is not)."""
        return max(0.0, self._valid_until - _core.monotonic())

    def unlock(self) -> None:
        """Releases it on every master, reachable or not (errors ignored: an
        unreachable master's hold ends with its lease)."""

        def release(_: int, master: LockClient) -> None:
            try:
                master._simple(self.name, ["LOCK.RELEASE", self.name, self.owner], retries=0)
            except LockError:
                pass

        timeout = _core.short_timeout(self._masters[0].options.command_timeout)
        _each(self._masters, release, _core.monotonic() + timeout)

    def __enter__(self) -> RedLockGuard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.unlock()


class AsyncMultiLock:
    """:class:`MultiLock` for asyncio, over :class:`AsyncLockClient` s::

    guard = await AsyncMultiLock([(east, "account:1"), (west, "account:2")]).try_lock(1.0)
    if guard is not None:
        async with guard:
            ...
    """

    def __init__(self, parts: Iterable[tuple[AsyncLockClient, str]]) -> None:
        self._parts = list(parts)
        if not self._parts:
            raise ValueError("a MultiLock needs at least one lock")

    async def lock(self) -> AsyncMultiGuard:
        """Takes every lock, waiting as long as it takes; watchdogs keep them."""
        guard = await self._acquire(None, None)
        assert guard is not None
        return guard

    async def try_lock(
        self, wait: Number = 0, lease: Number | None = None
    ) -> AsyncMultiGuard | None:
        """Every lock within ``wait`` seconds (shared), or None."""
        return await self._acquire(float(wait), lease)

    async def _acquire(self, wait: float | None, lease: Number | None) -> AsyncMultiGuard | None:
        deadline = None if wait is None else _core.monotonic() + wait
        held: list[AsyncLockGuard] = []
        try:
            for client, name in self._parts:
                part_wait = None if deadline is None else max(0.0, deadline - _core.monotonic())
                guard = await client._acquire(name, client.owner, lease, part_wait, False, None)
                if guard is None:
                    await _async_roll_back(held)
                    return None
                held.append(guard)
            if lease is not None and len(held) > 1:
                for guard in held:
                    sent = _core.monotonic()
                    reply = await guard._client._simple(
                        guard.name,
                        ["LOCK.RENEW", guard.name, guard.owner, _core.lease_ms(lease)],
                    )
                    if reply != 1:
                        await _async_roll_back(held)
                        return None
                    guard._entry.state.expires = sent + float(lease)
        except BaseException:
            await _async_roll_back(held)
            raise
        return AsyncMultiGuard(held)


async def _async_roll_back(held: list[AsyncLockGuard]) -> None:
    for guard in reversed(held):
        try:
            await guard.unlock()
        except LockError:
            pass


class AsyncMultiGuard:
    """The locks of an :class:`AsyncMultiLock`, released together."""

    def __init__(self, guards: list[AsyncLockGuard]) -> None:
        self.guards = guards

    def lost_reason(self) -> tuple[int, LostReason] | None:
        """The index of a lock known lost and why, or None."""
        for i, guard in enumerate(self.guards):
            why = guard.lost_reason
            if why is not None:
                return i, why
        return None

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

    async def __aenter__(self) -> AsyncMultiGuard:
        return self

    async def __aexit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.unlock()
        except LockError:
            if et is None:
                raise


class AsyncRedLock:
    """:class:`RedLock` for asyncio: each round asks every master at once."""

    def __init__(self, masters: list[AsyncLockClient], name: str) -> None:
        if not masters:
            raise ValueError("a RedLock needs at least one master")
        self._masters = list(masters)
        self.name = name

    @property
    def quorum(self) -> int:
        return len(self._masters) // 2 + 1

    async def try_lock(self, wait: Number, lease: Number) -> AsyncRedLockGuard | None:
        """The lock on a quorum within ``wait`` s for ``lease`` s, or None."""
        ms = _core.lease_ms(lease)
        lease = float(lease)
        budget_end = _core.monotonic() + float(wait)
        per_master = min(
            max(lease / 10, 0.005), _core.short_timeout(self._masters[0].options.command_timeout)
        )
        drift = lease / 100 + 0.002
        while True:
            owner = f"{self._masters[0].id}:redlock-{next(_rounds)}"
            started = _core.monotonic()

            async def attempt(master: AsyncLockClient, owner: str = owner) -> bool:
                try:
                    reply = await asyncio.wait_for(
                        master._simple(
                            self.name,
                            ["LOCK.ACQUIRE", self.name, owner, ms],
                            timeout=per_master,
                            retries=0,
                        ),
                        per_master,
                    )
                    return reply is None
                except (LockError, asyncio.TimeoutError):
                    return False

            granted = await asyncio.gather(*(attempt(m) for m in self._masters))
            validity = lease - (_core.monotonic() - started) - drift
            guard = AsyncRedLockGuard(self._masters, self.name, owner, started + validity)
            if sum(granted) >= self.quorum and validity > 0:
                return guard
            await guard.unlock()
            left = budget_end - _core.monotonic()
            if left <= 0:
                return None
            await asyncio.sleep(min(left, random.uniform(0.01, 0.05)))


class AsyncRedLockGuard:
    """An :class:`AsyncRedLock` held on a quorum (see :class:`RedLockGuard`)."""

    def __init__(
        self, masters: list[AsyncLockClient], name: str, owner: str, valid_until: float
    ) -> None:
        self._masters = masters
        self.name = name
        self.owner = owner
        self._valid_until = valid_until

    def validity(self) -> float:
        """Seconds the lock is still valid (0 when it is not)."""
        return max(0.0, self._valid_until - _core.monotonic())

    async def unlock(self) -> None:
        """Releases it on every master, reachable or not (errors ignored)."""
        timeout = _core.short_timeout(self._masters[0].options.command_timeout)

        async def release(master: AsyncLockClient) -> None:
            try:
                await asyncio.wait_for(
                    master._simple(self.name, ["LOCK.RELEASE", self.name, self.owner], retries=0),
                    timeout,
                )
            except (LockError, asyncio.TimeoutError):
                pass

        await asyncio.gather(*(release(m) for m in self._masters))

    async def __aenter__(self) -> AsyncRedLockGuard:
        return self

    async def __aexit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.unlock()
