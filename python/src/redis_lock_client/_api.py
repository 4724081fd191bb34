"""What both clients' objects do without I/O, written once: each call
that sends one command, or hands one job to the client's engine, returns
what the engine returns: the value in the threaded client, an awaitable of
it in the asyncio client. A flavour's own files add only what awaits more
than once and the ``with`` / ``async with`` protocol.

The type parameters say what a call returns in each flavour (the
flavour's ``_io.Later[T]``): G a guard, OG a guard or None, B a bool, F a
float or None, D an info dict, Z an integer, N None, R a
:class:`~redis_lock_client.LatchResult`, E the flavour's Event, P permits,
OP permits or None."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Generic, TypeVar, cast

from . import _protocol as p
from ._holds import Entry, LostCallback, Registry, monotonic
from ._protocol import LOCK, PERMIT, READ, WRITE, Kind, LostReason, Number, Options, short_timeout
from .errors import PermitsNotHeld

G = TypeVar("G")
OG = TypeVar("OG")
B = TypeVar("B")
F = TypeVar("F")
D = TypeVar("D")
Z = TypeVar("Z")
N = TypeVar("N")
R = TypeVar("R")
E = TypeVar("E")
P = TypeVar("P")
OP = TypeVar("OP")
C = TypeVar("C", bound="LockApi[Any, Any, Any, Any, Any]")
Lost = LostCallback | None
Secs = Number | None  # seconds, or None: no limit


class LockApi(Generic[G, OG, B, F, D]):
    """A client's calls. Each client names its own parts: the engine, the
    guard class, the acquisition, and how owner ids end."""

    _Engine: Callable[[Any, Options], Any]
    _Guard: Callable[..., Any]
    _acquire: Callable[..., Any]
    _suffix: Callable[[], str]

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
        wait_piece: Number = 2.0,
    ) -> None:
        p.lease_ms(watchdog_lease)
        if not wait_piece >= 0.01:
            raise ValueError(f"wait_piece must be at least 0.01 s: {wait_piece!r}")
        options = Options(
            float(watchdog_lease),
            None if command_timeout is None else float(command_timeout),
            retries,
            float(retry_interval),
            float(wait_margin),
            None if sync_replicas is None else (int(sync_replicas[0]), float(sync_replicas[1])),
            track_locks,
            float(wait_piece),
        )
        options.sync_args()
        self._engine = self._Engine(client, options)
        self._owner: str | None = None

    @property
    def id(self) -> str:
        """This client's id: the first half of every owner id it makes."""
        return str(self._engine.id)

    @property
    def options(self) -> Options:
        return cast(Options, self._engine.options)

    def as_owner(self: C, owner: str) -> C:
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
        return self._owner_now()

    def _owner_now(self) -> str:
        # Passed to the acquisition uncalled: in asyncio the owner is the
        # task that awaits the call, which may not be the one that made it.
        if self._owner is not None:
            return self._owner
        return f"{self._engine.id}:{type(self)._suffix()}"

    def _take(
        self,
        name: str,
        lease: Number | None,
        wait: Number | None,
        fenced: bool,
        on_lost: Lost,
        kind: Kind,
    ) -> OG:
        w = None if wait is None else float(wait)
        guard: OG = self._acquire(
            self._engine, name, self._owner_now, lease, w, fenced, on_lost, self._Guard, kind
        )
        return guard

    # Locks (Redisson's RLock; the read-write lock is its RReadWriteLock,
    # fair: readers and writers wait in one FIFO queue).

    def lock(self, name: str, *, on_lost: Lost = None) -> G:
        """Takes the lock, waiting as long as it takes in the server's FIFO
        queue; the watchdog keeps it until the guard is released.
        Re-entrant per owner. ``on_lost(reason)``: see the guard's
        ``add_lost_callback``."""
        return cast(G, self._take(name, None, None, False, on_lost, LOCK))

    def try_lock(
        self, name: str, wait: Secs = 0, lease: Secs = None, *, on_lost: Lost = None
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
        return cast(G, self._take(name, None, None, True, on_lost, LOCK))

    def try_lock_fenced(
        self, name: str, wait: Secs = 0, lease: Secs = None, *, on_lost: Lost = None
    ) -> OG:
        """:meth:`try_lock` with a fencing token."""
        return self._take(name, lease, wait, True, on_lost, LOCK)

    def read_lock(self, name: str, *, on_lost: Lost = None) -> G:
        """A read hold of the read-write lock ``name`` (readers share; it
        queues behind a waiting writer); re-entrant, also by its writer."""
        return cast(G, self._take(name, None, None, False, on_lost, READ))

    def write_lock(self, name: str, *, on_lost: Lost = None) -> G:
        """Its write hold (excludes readers and writers); re-entrant.
        :class:`UpgradeRefused` when this owner holds it for reading."""
        return cast(G, self._take(name, None, None, False, on_lost, WRITE))

    def try_read_lock(
        self, name: str, wait: Secs = 0, lease: Secs = None, *, on_lost: Lost = None
    ) -> OG:
        """:meth:`read_lock` within ``wait`` s, ``lease`` as in :meth:`try_lock`."""
        return self._take(name, lease, wait, False, on_lost, READ)

    def try_write_lock(
        self, name: str, wait: Secs = 0, lease: Secs = None, *, on_lost: Lost = None
    ) -> OG:
        """:meth:`write_lock` within ``wait`` s, ``lease`` as in :meth:`try_lock`."""
        return self._take(name, lease, wait, False, on_lost, WRITE)

    def write_lock_fenced(self, name: str, *, on_lost: Lost = None) -> G:
        """:meth:`write_lock` with a fencing token (see :meth:`lock_fenced`)."""
        return cast(G, self._take(name, None, None, True, on_lost, WRITE))

    def try_write_lock_fenced(
        self, name: str, wait: Secs = 0, lease: Secs = None, *, on_lost: Lost = None
    ) -> OG:
        """:meth:`try_write_lock` with a fencing token."""
        return self._take(name, lease, wait, True, on_lost, WRITE)

    # About any lock.

    def is_locked(self, name: str) -> B:
        """Whether anyone holds the lock."""
        return cast(B, self._engine.counted.simple(name, ["EXISTS", name], decode=bool))

    def remaining_lease(self, name: str) -> F:
        """The lock's remaining lease in seconds, whoever holds it; None if free."""
        return cast(F, self._engine.counted.simple(name, ["PTTL", name], decode=p.seconds))

    def force_unlock(self, name: str) -> B:
        """Deletes the lock whoever holds it (``LOCK.FORCE``): an operator's
        tool; the holder is told within milliseconds (tracking) or at its
        next renewal. True if a lock existed."""
        return cast(B, self._engine.counted.simple(name, ["LOCK.FORCE", name], decode=p.is_one))

    def info(self, name: str) -> D:
        """``LOCK.INFO``: state, owners, ttl_ms, deadline_ms, waiters, token."""
        return cast(D, self._engine.counted.simple(name, ["LOCK.INFO", name], decode=p.pairs))

    def send(
        self, name: str, args: list[Any], timeout: Number | None = None, retries: int | None = None
    ) -> Any:
        """Sends a command that is safe to resend, routed by ``name``, with
        this client's retries (``retries=0``: one attempt) and reply timeout."""
        t = None if timeout is None else float(timeout)
        return self._engine.counted.simple(name, args, t, retries)


class Guarded(Generic[E]):
    """What a guard tells of its loss, kept in ``_entry``: its hold's, or
    for leased permits an entry standing for them all."""

    _entry: Entry

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._registry: Registry = engine.registry
        self._home = engine.io.home()
        self._released = False

    def _expire_if_due(self) -> None:
        self._registry.expire_if_due(self._entry)

    @property
    def lost(self) -> E:
        """Set when it is lost: wait on it, or poll ``lost.is_set()``."""
        self._expire_if_due()
        return cast(E, self._entry.lost_event())

    @property
    def lost_reason(self) -> LostReason | None:
        """Why it was lost (for permits: why the first one was), or None
        while it is not known lost."""
        self._expire_if_due()
        with self._entry.mutex:
            return self._entry.lost

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: LostCallback) -> None:
        """Calls ``callback(reason)`` (a :class:`LostReason`) once when it is
        lost (permits: the first), from the watchdog or the tracking
        listener (at once if it already is). It must not block; what it
        raises is logged (logger ``redis_lock_client``) and otherwise
        ignored."""
        with self._entry.mutex:
            why = self._entry.lost
            if why is None:
                self._entry.callbacks.append(callback)
        if why is not None:
            callback(why)


class HoldView(Guarded[E], Generic[E, B, F]):
    """One hold of a lock (``LockGuard``, ``AsyncLockGuard``): ``unlock()``
    gives it back (also at the end of its ``with`` / ``async with`` block).
    ``lost`` is an Event set the moment the client learns the lock is gone
    (forced, deleted or expired on the server, told by tracking within
    milliseconds or by the next renewal; renewals failing for a whole
    lease; a caller-given lease ending); ``lost_reason`` says why.

    A guard garbage-collected unreleased is released in the background, so
    a forgotten guard is never renewed for ever; ``release_on_drop =
    False`` keeps its hold until its lease ends instead (what redis-py does
    with a lock object that has a timeout)."""

    def __init__(self, engine: Any, entry: Entry, token: int | None) -> None:
        super().__init__(engine)
        self._entry = entry
        self.release_on_drop = True
        #: The fencing token of this grant (fenced locks only).
        self.token = token

    @property
    def name(self) -> str:
        return self._entry.name

    @property
    def owner(self) -> str:
        return self._entry.owner

    @property
    def kind(self) -> str:
        """``"lock"``, or a read-write lock's ``"read"`` / ``"write"``."""
        return self._entry.kind.label

    def is_held(self) -> B:
        """Asks the server whether this owner still holds the lock."""
        args = ["HGET", self.name, self._entry.field]
        decode = partial(p.still_held, self._entry.kind)
        return cast(B, self._engine.counted.simple(self.name, args, decode=decode))

    def remaining_lease(self) -> F:
        """The lease left on the server (s), None if not held by this owner."""
        args, decode = ["LOCK.INFO", self.name], partial(p.own_lease, self._entry.field)
        return cast(F, self._engine.counted.simple(self.name, args, decode=decode))

    def renew(self, lease: Number) -> B:
        """Restarts the lease at ``lease`` s from now (a hold with a
        caller-given lease; the watchdog renews the others); False if the
        owner no longer holds it."""
        return cast(B, self._engine.restart(self._entry, float(lease)))

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not self.release_on_drop:
            return
        self._released = True
        engine = self._engine
        engine.io.when_dropped(self._home, engine.quietly, engine.release, self._entry)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, owner={self.owner!r}, "
            f"kind={self.kind!r}, token={self.token!r})"
        )


class PermitsView(Guarded[E]):
    """Leased permits (``Permits``, ``AsyncPermits``): ``release()`` gives
    them back (also at the end of their ``with`` / ``async with`` block).
    ``lost`` is an Event set when the client learns that one of them is
    gone (taken away on the server, renewals failing for a whole lease, a
    caller-given lease ending, a release that found it gone)."""

    def __init__(
        self,
        engine: Any,
        name: str,
        ids: list[str],
        on_lost: Lost,
        ends: list[float | None],
        renew_now: bool,
        watchdog: bool,
    ) -> None:
        super().__init__(engine)
        self.name = name
        #: The permits' ids (32 hex characters each).
        self.ids = tuple(ids)
        self._entries: list[Entry] = []
        # Outside the registry, marked lost (``Registry.mark_lost``) at the
        # first permit's loss: the guard's Event, reason and callbacks.
        self._entry = Entry((name, "", PERMIT.label), "", PERMIT, None, engine.registry)
        if on_lost is not None:
            self._entry.callbacks.append(on_lost)
        self._record(ends, renew_now, watchdog)

    def _record(self, ends: list[float | None], renew_now: bool, watchdog: bool) -> None:
        """Records the grant (each permit's end; None: found gone), each
        permit's loss callback holding this guard weakly (a guard dropped
        unreleased is collected and released, not renewed for ever). When
        interrupted, nothing stays recorded: the caller gives them back."""
        engine, ref = self._engine, weakref.ref(self)

        def on_lost(why: LostReason) -> None:
            guard = ref()
            if guard is not None:
                guard._registry.mark_lost(guard._entry, why)

        entries: list[Entry] = []
        try:
            for pid, end in zip(self.ids, ends):
                entry = engine.registry.entry(self.name, pid, PERMIT)
                entries.append(entry)
                engine.hold(entry, end or monotonic(), renew_now, watchdog, on_lost)
                if end is None:
                    engine.registry.mark_lost(entry, LostReason(LostReason.NOT_HELD))
        except BaseException:
            for entry in entries:
                engine.registry.retire(entry)
            raise
        self._entries = entries

    def _expire_if_due(self) -> None:
        for entry in self._entries:
            self._registry.expire_if_due(entry)

    @property
    def lost_ids(self) -> list[str]:
        """The ids known lost."""
        return [e.owner for e in self._entries if e.lost is not None]

    def release(self) -> Any:
        raise NotImplementedError

    def _take_for_release(self) -> tuple[list[str], list[str], dict[str, Entry]]:
        """(still held, known gone, entries by id), every entry retired
        first: a renewal racing the release proves nothing.
        :class:`PermitsNotHeld` when released already."""
        if self._released:
            raise PermitsNotHeld(self.name, list(self.ids))
        self._released = True
        pending: list[str] = []
        gone: list[str] = []
        for e in self._entries:
            with e.mutex:
                known_lost = e.lost is not None
            self._registry.retire(e)
            (gone if known_lost else pending).append(e.owner)
        return pending, gone, {e.owner: e for e in self._entries}

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not getattr(self, "_entries", None):
            return
        self._engine.io.when_dropped(self._home, self._engine.quietly, self.release)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, ids={list(self.ids)!r})"


class Calls:
    """An object named ``name`` whose calls send one command each and
    decode its reply (``Counted.simple``: awaited in the asyncio client)
    with ``decode(command, reply)``."""

    def __init__(self, engine: Any, name: str) -> None:
        self._engine = engine
        self.name = name

    def _call(self, args: list[Any], decode: Callable[[str, Any], Any], **how: Any) -> Any:
        return self._engine.counted.simple(self.name, args, decode=partial(decode, args[0]), **how)

    def _wait(self, *how: Any) -> Any:
        """A wait in the server's queue (``Counted.queued``: ``how`` after the name)."""
        return self._engine.counted.queued(self.name, *how)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class CountsApi(Calls, Generic[B, Z, D]):
    """What both semaphores answer from their count of free permits."""

    def try_set_permits(self, permits: int, ttl: Number | None = None) -> B:
        """Sets the number of permits if the semaphore does not exist
        (``LOCK.SEMSET``; with ``ttl`` s it expires). False if it exists."""
        return cast(B, self._call(p.sem_set_args(self.name, permits, ttl), p.flag, once=True))

    def add_permits(self, delta: int) -> Z:
        """Adds ``delta`` permits (may be negative; a missing semaphore
        counts as 0). The new number available."""
        return cast(Z, self._call(p.sem_add_args(self.name, delta), p.integer, once=True))

    def available_permits(self) -> Z:
        """The permits free now (0 when the semaphore does not exist)."""
        return cast(Z, self._call(["LOCK.SEMAVAILABLE", self.name], p.integer))

    def drain_permits(self) -> Z:
        """Takes every free permit; how many it took."""
        return cast(Z, self._call(["LOCK.SEMDRAIN", self.name], p.integer, once=True))

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
        """Takes ``permits``, waiting as long as it takes (server-side, in
        pieces that keep their place, on connections of their own)."""
        return cast(N, self._queue(permits, None, decode=p.granted_forever))

    def try_acquire(self, permits: int = 1, wait: Number | None = None) -> B:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt, no wait). False when not."""
        ms, within = p.wait_plan(wait)
        if ms is None:
            args = p.sem_acquire_args(self.name, permits, None)
            return cast(B, self._call(args, p.flag, once=True))
        return cast(B, self._queue(permits, within, decode=bool))

    def _queue(self, permits: int, wait: float | None, decode: Callable[[Any], Any]) -> Any:
        """A wait for ``permits`` (``Counted.queued``); a grant the caller
        was not told of goes back."""
        make = partial(p.sem_acquire_args, self.name, permits)
        release = p.sem_release_args(self.name, permits)

        def give_back(_: Any) -> Any:
            return self._engine.counted.simple(self.name, release, once=True)

        return self._wait(make, p.is_one, wait, lambda _: 1, give_back, decode)

    def release(self, permits: int = 1) -> Z:
        """Gives ``permits`` back (they go to the head of the queue at once);
        the count after the release, before waiters took their share."""
        return cast(Z, self._call(p.sem_release_args(self.name, permits), p.integer, once=True))


class PermitSemaphoreApi(CountsApi[B, Z, D], Generic[B, Z, D, P, OP]):
    """Redisson's ``RPermitExpirableSemaphore``:
    ``locks.permit_semaphore(name)``, whose permits have ids and leases
    (``with sem.acquire() as permits:``; ``async with await`` in asyncio).
    With ``lease`` s the server takes the permits back at its end (no
    watchdog; the guard's ``lost`` is set then); without, the watchdog
    renews them."""

    # The flavour's acquisition: (permits, lease, WAIT ms (0: forever) or
    # None: one attempt, seconds the server may wait or None, on_lost) ->
    # permits or None.
    _acquire: Callable[..., Any]

    def acquire(self, permits: int = 1, lease: Number | None = None, *, on_lost: Lost = None) -> P:
        """Takes ``permits``, waiting as long as it takes (server-side FIFO,
        on a connection of its own)."""
        return cast(P, self._acquire(permits, lease, 0, None, on_lost))

    def try_acquire(
        self, permits: int = 1, lease: Secs = None, wait: Secs = None, *, on_lost: Lost = None
    ) -> OP:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt). None when not."""
        ms, within = p.wait_plan(wait)
        return cast(OP, self._acquire(permits, lease, ms, within, on_lost))

    def release(self, *ids: str) -> Z:
        """Releases permits by id (taken by anyone): how many.
        :class:`ServerError` naming an id not held, and nothing released."""
        args = p.permit_release_args(self.name, [i.lower() for i in ids])
        return cast(Z, self._call(args, p.integer, once=True))


class LatchApi(Calls, Generic[B, Z, R, D]):
    """Redisson's ``RCountDownLatch``: ``locks.count_down_latch(name)``
    (``LOCK.LATCH*``, ``LOCK.AWAIT``). The latch is open (waits end) when
    its count reaches zero, when it is deleted, or when it never existed;
    the wait is server-side, on a connection of its own."""

    def try_set_count(self, count: int, ttl: Number | None = None) -> B:
        """Sets the count (>= 1) if the latch does not exist; False if it
        does. With ``ttl`` s the latch expires: waiters get
        :attr:`LatchResult.EXPIRED`."""
        return cast(B, self._call(p.latch_set_args(self.name, count, ttl), p.flag, once=True))

    def count_down(self) -> Z:
        """One less; the count left (0: open, waiters told)."""
        return cast(Z, self._call(["LOCK.COUNTDOWN", self.name], p.integer, once=True))

    def count(self) -> Z:
        """The count (0 when the latch does not exist)."""
        return cast(Z, self._call(["LOCK.LATCHCOUNT", self.name], p.integer))

    def wait_zero(self, timeout: Number | None = None) -> R:
        """Waits (server-side) until the count is zero, at most ``timeout``
        s (None: forever): :attr:`~LatchResult.REACHED`,
        :attr:`~LatchResult.TIMED_OUT` or :attr:`~LatchResult.EXPIRED` (the
        latch's ttl ended first). Redisson's ``await``."""
        make, wait = partial(p.await_args, self.name), None if timeout is None else float(timeout)
        return cast(R, self._wait(make, p.latch_ended, wait, lambda s: s[0], None, p.latch_result))

    def info(self) -> D:
        """``LOCK.LATCHINFO``: ``count``, ``ttl_ms``, ``waiters`` (dicts
        ``waited_ms``, ``timeout_ms``)."""
        return cast(D, self._call(["LOCK.LATCHINFO", self.name], p.latch_info))


class MultiParts(Generic[G, OG]):
    """All of several locks, or none (``MultiLock``, ``AsyncMultiLock``):
    taken in the order given within one shared wait budget; if one cannot
    be had, those already taken are released before the call returns. List
    the locks in the same order everywhere (opposite orders can each hold
    one and wait for the other)::

        both = MultiLock([(east, "account:1"), (west, "account:2")])
        guard = both.try_lock(wait=1.0)  # None if not had in time
    """

    def __init__(self, parts: Iterable[tuple[Any, str]]) -> None:
        self._parts = list(parts)
        if not self._parts:
            raise ValueError("a MultiLock needs at least one lock")

    def _acquire(self, wait: float | None, lease: Number | None) -> Any:
        raise NotImplementedError

    def lock(self) -> G:
        """Takes every lock, waiting as long as it takes; watchdogs keep them."""
        return cast(G, self._acquire(None, None))

    def try_lock(self, wait: Number = 0, lease: Number | None = None) -> OG:
        """Every lock within ``wait`` seconds (shared), or None. With a
        ``lease``, every lease restarts together once all are held."""
        return cast(OG, self._acquire(float(wait), lease))


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
    """One lock on a majority (N/2 + 1) of N independent masters
    (``RedLock``, ``AsyncRedLock``).

    Each round sends one ``LOCK.ACQUIRE`` (no waiting) to every master at
    once, each bounded by a short timeout; it wins when a quorum granted it
    and time is left: validity = lease - elapsed - drift (1% of the lease +
    2 ms). A lost round is released on every master, and the next starts
    after a short random pause until ``wait`` is spent. Each round uses a
    fresh owner id and never resends, so releasing it everywhere never
    frees another holder's lock: no re-entry, no watchdog (pick a lease
    longer than the work), no fencing token.
    """

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


class RedLockView(RedLockPlan):
    """A RedLock held on a quorum, valid for :meth:`validity` more seconds;
    released on every master by ``unlock()`` or the end of its ``with`` /
    ``async with`` block."""

    def __init__(self, masters: list[Any], name: str, owner: str, valid_until: float) -> None:
        super().__init__(masters, name)
        self.owner = owner
        self._valid_until = valid_until

    def validity(self) -> float:
        """Seconds the lock is still valid (0 when it is not)."""
        return max(0.0, self._valid_until - monotonic())
