"""What both clients' objects do without I/O, written once: the lock calls
(each returns what the client's ``_must`` / ``_take`` return: a guard in
the threaded client, an awaitable of one in the asyncio client), and the
bookkeeping of MultiLock and RedLock, and the semaphores' and the latch's
one-command calls (``Calls``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Generic, TypeVar, cast

from . import _protocol as p
from ._holds import LostCallback, monotonic
from ._protocol import LOCK, READ, WRITE, Kind, LostReason, Number, Options, short_timeout

G = TypeVar("G")  # a guard (or an awaitable of one)
OG = TypeVar("OG")  # a guard or None (or an awaitable of one)
Lost = LostCallback | None


class LockApi(Generic[G, OG]):
    _engine: Any
    _owner: str | None
    _suffix: Callable[[], str]

    def _take(
        self,
        name: str,
        lease: Number | None,
        wait: Number | None,
        fenced: bool,
        on_lost: Lost,
        kind: Kind,
    ) -> OG:
        raise NotImplementedError

    def _must(self, name: str, fenced: bool, on_lost: Lost, kind: Kind) -> G:
        raise NotImplementedError

    @property
    def id(self) -> str:
        """This client's id: the first half of every owner id it makes."""
        return str(self._engine.id)

    @property
    def options(self) -> Options:
        options: Options = self._engine.options
        return options

    def as_owner(self, owner: str) -> Any:
        """The same client (connections, watchdog, hold counts), acting as
        ``owner``: a worker name, a request id, or the id a Redisson
        application uses (then both re-enter each other's holds). An owner
        id must be used by one holder at a time."""
        if not owner:
            raise ValueError("an owner id must not be empty")
        view = object.__new__(type(self))
        view._engine, view._owner = self._engine, owner
        return view

    @property
    def owner(self) -> str:
        """The owner id this client acts as now."""
        if self._owner is not None:
            return self._owner
        return f"{self._engine.id}:{type(self)._suffix()}"

    # Locks (Redisson's RLock; the read-write lock is its RReadWriteLock,
    # fair: readers and writers wait in one FIFO queue).

    def lock(self, name: str, *, on_lost: Lost = None) -> G:
        """Takes the lock, waiting as long as it takes in the server's FIFO
        queue; the watchdog keeps it until the guard is released.
        Re-entrant per owner. ``on_lost(reason)``: see the guard's
        ``add_lost_callback``."""
        return self._must(name, False, on_lost, LOCK)

    def try_lock(
        self,
        name: str,
        wait: Number | None = 0,
        lease: Number | None = None,
        *,
        on_lost: Lost = None,
    ) -> OG:
        """Tries to take the lock, waiting at most ``wait`` seconds (0: one
        attempt; None: as long as it takes). With ``lease`` the lock frees
        itself after it and no watchdog runs; without, the watchdog keeps
        it. None when someone else held it for the whole wait."""
        return self._take(name, lease, wait, False, on_lost, LOCK)

    def lock_fenced(self, name: str, *, on_lost: Lost = None) -> G:
        """:meth:`lock`, with the grant's fencing token in ``guard.token``: it
        grows with every grant; the resource refuses writes with a token
        older than one it has seen (``LOCK.FENCE`` for data in Redis)."""
        return self._must(name, True, on_lost, LOCK)

    def try_lock_fenced(
        self,
        name: str,
        wait: Number | None = 0,
        lease: Number | None = None,
        *,
        on_lost: Lost = None,
    ) -> OG:
        """:meth:`try_lock` with a fencing token."""
        return self._take(name, lease, wait, True, on_lost, LOCK)

    def read_lock(self, name: str, *, on_lost: Lost = None) -> G:
        """A read hold of the read-write lock ``name`` (readers share; it
        queues behind a waiting writer); re-entrant, also by its writer."""
        return self._must(name, False, on_lost, READ)

    def write_lock(self, name: str, *, on_lost: Lost = None) -> G:
        """Its write hold (excludes readers and writers); re-entrant.
        :class:`UpgradeRefused` when this owner holds it for reading."""
        return self._must(name, False, on_lost, WRITE)

    def try_read_lock(
        self,
        name: str,
        wait: Number | None = 0,
        lease: Number | None = None,
        *,
        on_lost: Lost = None,
    ) -> OG:
        """:meth:`read_lock` within ``wait`` s, ``lease`` as in :meth:`try_lock`."""
        return self._take(name, lease, wait, False, on_lost, READ)

    def try_write_lock(
        self,
        name: str,
        wait: Number | None = 0,
        lease: Number | None = None,
        *,
        on_lost: Lost = None,
    ) -> OG:
        """:meth:`write_lock` within ``wait`` s, ``lease`` as in :meth:`try_lock`."""
        return self._take(name, lease, wait, False, on_lost, WRITE)

    def write_lock_fenced(self, name: str, *, on_lost: Lost = None) -> G:
        """:meth:`write_lock` with a fencing token (see :meth:`lock_fenced`)."""
        return self._must(name, True, on_lost, WRITE)

    def try_write_lock_fenced(
        self,
        name: str,
        wait: Number | None = 0,
        lease: Number | None = None,
        *,
        on_lost: Lost = None,
    ) -> OG:
        """:meth:`try_write_lock` with a fencing token."""
        return self._take(name, lease, wait, True, on_lost, WRITE)


class MultiParts:
    """What both MultiLocks keep: the (client, name) pairs."""

    def __init__(self, parts: Iterable[tuple[Any, str]]) -> None:
        self._parts = list(parts)
        if not self._parts:
            raise ValueError("a MultiLock needs at least one lock")


class MultiHeld:
    """What both MultiLock guards tell without asking the server."""

    def __init__(self, guards: list[Any]) -> None:
        self.guards = guards

    def lost_reason(self) -> tuple[int, LostReason] | None:
        """The index of a lock known lost and why, or None."""
        for i, guard in enumerate(self.guards):
            why = guard.lost_reason
            if why is not None:
                return i, why
        return None


_rounds = itertools.count(1)


class RedLockPlan:
    """What both RedLocks compute: the quorum, each round's owner id and
    deadlines (validity = lease - elapsed - drift, 1% of the lease + 2 ms)."""

    def __init__(self, masters: list[Any], name: str) -> None:
        if not masters:
            raise ValueError("a RedLock needs at least one master")
        self._masters = list(masters)
        self.name = name

    @property
    def quorum(self) -> int:
        return len(self._masters) // 2 + 1

    def _timeout(self) -> float:
        return short_timeout(self._masters[0].options.command_timeout)

    def _round(self) -> str:
        return f"{self._masters[0].id}:redlock-{next(_rounds)}"


class RedLockView:
    """What both RedLock guards tell without asking the servers."""

    def __init__(self, masters: list[Any], name: str, owner: str, valid_until: float) -> None:
        self._masters = masters
        self.name = name
        self.owner = owner
        self._valid_until = valid_until

    def validity(self) -> float:
        """Seconds the lock is still valid (0 when it is not)."""
        return max(0.0, self._valid_until - monotonic())

    def _timeout(self) -> float:
        return short_timeout(self._masters[0].options.command_timeout)


B = TypeVar("B")  # a bool (or an awaitable of one)
Z = TypeVar("Z")  # an integer (...)
D = TypeVar("D")  # an info dict (...)
N = TypeVar("N")  # None (...)
R = TypeVar("R")  # a LatchResult (...)


class Calls:
    """An object named ``name`` whose calls send one command each and
    decode its reply (``Counted.call``: awaited in the asyncio client)."""

    def __init__(self, engine: Any, name: str) -> None:
        self._engine = engine
        self.name = name

    def _call(self, args: list[Any], decode: Callable[[Any], Any], **how: Any) -> Any:
        return self._engine.counted.call(self.name, args, decode, **how)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class CountsApi(Calls, Generic[B, Z, D]):
    """What both semaphores answer from their count of free permits."""

    def try_set_permits(self, permits: int, ttl: Number | None = None) -> B:
        """Sets the number of permits if the semaphore does not exist
        (``LOCK.SEMSET``; with ``ttl`` s it expires). False if it exists."""
        args = p.sem_set_args(self.name, permits, ttl)
        return cast(B, self._call(args, partial(p.flag, args[0]), once=True))

    def add_permits(self, delta: int) -> Z:
        """Adds ``delta`` permits (may be negative; a missing semaphore
        counts as 0). The new number available."""
        args = p.sem_add_args(self.name, delta)
        return cast(Z, self._call(args, partial(p.integer, args[0]), once=True))

    def available_permits(self) -> Z:
        """The permits free now (0 when the semaphore does not exist)."""
        args = ["LOCK.SEMAVAILABLE", self.name]
        return cast(Z, self._call(args, partial(p.integer, args[0])))

    def drain_permits(self) -> Z:
        """Takes every free permit; how many it took."""
        args = ["LOCK.SEMDRAIN", self.name]
        return cast(Z, self._call(args, partial(p.integer, args[0]), once=True))

    def info(self) -> D:
        """``LOCK.SEMINFO``: ``available``, ``ttl_ms``, ``permits`` (``(id,
        deadline unix ms or -1)``), ``waiters`` (dicts ``wants``,
        ``permits``, ``waited_ms``, ``timeout_ms``); None when missing."""
        return cast(D, self._call(["LOCK.SEMINFO", self.name], p.sem_info))


class SemaphoreApi(CountsApi[B, Z, D], Generic[B, Z, D, N]):
    """Redisson's ``RSemaphore``: ``locks.semaphore(name)``. Permits belong
    to nobody: any caller may release them; waits are server-side, FIFO (a
    newcomer never overtakes a waiter)."""

    def acquire(self, permits: int = 1) -> N:
        """Takes ``permits``, waiting as long as it takes (server-side,
        ``WAIT 0``, on a connection of its own)."""
        args = p.sem_acquire_args(self.name, permits, 0)
        return cast(N, self._call(args, partial(p.granted, args[0]), once=True, blocks=True))

    def try_acquire(self, permits: int = 1, wait: Number | None = None) -> B:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt, no wait). False when not."""
        ms, within = p.wait_plan(wait)
        args = p.sem_acquire_args(self.name, permits, ms)
        decode = partial(p.flag, args[0])
        return cast(B, self._call(args, decode, once=True, within=within, blocks=ms is not None))

    def release(self, permits: int = 1) -> Z:
        """Gives ``permits`` back (they go to the head of the queue at once);
        the count after the release, before waiters took their share."""
        args = p.sem_release_args(self.name, permits)
        return cast(Z, self._call(args, partial(p.integer, args[0]), once=True))


class LatchApi(Calls, Generic[B, Z, R, D]):
    """Redisson's ``RCountDownLatch``: ``locks.count_down_latch(name)``
    (``LOCK.LATCH*``, ``LOCK.AWAIT``). The latch is open (waits end) when
    its count reaches zero, when it is deleted, or when it never existed;
    the wait is server-side, on a connection of its own."""

    def try_set_count(self, count: int, ttl: Number | None = None) -> B:
        """Sets the count (>= 1) if the latch does not exist; False if it
        does. With ``ttl`` s the latch expires: waiters get
        :attr:`LatchResult.EXPIRED`."""
        args = p.latch_set_args(self.name, count, ttl)
        return cast(B, self._call(args, partial(p.flag, args[0]), once=True))

    def count_down(self) -> Z:
        """One less; the count left (0: open, waiters told)."""
        args = ["LOCK.COUNTDOWN", self.name]
        return cast(Z, self._call(args, partial(p.integer, args[0]), once=True))

    def count(self) -> Z:
        """The count (0 when the latch does not exist)."""
        args = ["LOCK.LATCHCOUNT", self.name]
        return cast(Z, self._call(args, partial(p.integer, args[0])))

    def wait_zero(self, timeout: Number | None = None) -> R:
        """Waits (server-side) until the count is zero, at most ``timeout``
        s (None: forever): :attr:`~LatchResult.REACHED`,
        :attr:`~LatchResult.TIMED_OUT` or :attr:`~LatchResult.EXPIRED` (the
        latch's ttl ended first). Redisson's ``await``."""
        args = p.await_args(self.name, timeout)
        within = None if timeout is None else float(timeout)
        return cast(R, self._call(args, p.latch_result, once=True, within=within, blocks=True))

    def info(self) -> D:
        """``LOCK.LATCHINFO``: ``count``, ``ttl_ms``, ``waiters`` (dicts
        ``waited_ms``, ``timeout_ms``)."""
        return cast(D, self._call(["LOCK.LATCHINFO", self.name], p.latch_info))
