"""The thread-based client: :class:`LockClient` and :class:`LockGuard`.

How retries stay safe (the same argument as the Rust crate's): commands
that change a hold count are serialised per (lock, owner), so the count
this client keeps is the server's. After a connection fails with such a
command in flight, the client closes it, kills it by id from another
connection (``CLIENT KILL ID``: once that returns, the server has run all
it read from it and reads nothing more), then reads ``HGET lock owner``:
the old count + 1 (acquire) or - 1 (release) means the command ran, so it
is not sent again; the old count means it did not, so it is resent;
anything else is :class:`HoldCountMismatch`. A wait whose connection broke,
or that its caller interrupted, is decided the same way: a grant made at
that instant is adopted (or given back), never leaked.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import redis
from redis import exceptions as rex

from . import _core
from ._core import (
    LOCK,
    PERMIT,
    READ,
    WRITE,
    EntryState,
    Kind,
    LostCallback,
    LostReason,
    Number,
    Options,
)
from .errors import (
    ConnectionLost,
    HoldCountMismatch,
    LockError,
    NotHeld,
    OutcomeUnknown,
    ProtocolViolation,
    ServerError,
    Uncertain,
    describe,
    refused,
)
from .latch import CountDownLatch
from .semaphore import PermitExpirableSemaphore, Semaphore

# How long the watchdog stays with nothing to watch before it ends (s).
WATCHDOG_IDLE = 10.0

TRANSPORT = (rex.ConnectionError, rex.TimeoutError, OSError)
WRONG_ROLE = (
    rex.ReadOnlyError,
    rex.MovedError,
    rex.AskError,
    rex.TryAgainError,
    rex.ClusterDownError,
)


def wrong_role(e: BaseException) -> bool:
    return isinstance(e, WRONG_ROLE) or _core.is_wrong_role(e)


class _Entry:
    """This client's knowledge of one (lock, owner) it holds: of one kind
    of hold (a lock's, a read-write lock's read or write hold), which is
    one hash field's count."""

    def __init__(self, name: str, owner: str, kind: Kind = LOCK) -> None:
        self.name = name
        self.owner = owner
        self.kind = kind
        self.field = kind.field(owner)
        self.key = (name, self.field, kind.label)
        self.op = threading.Lock()  # serialises hold-count changes
        self.mutex = threading.Lock()  # guards state
        self.state = EntryState()
        # Made when a guard's ``lost`` is first asked for: a threading.Event
        # (a Condition, three locks) costs more than the rest of an entry,
        # and most holds are released without anyone waiting on it.
        self._lost: threading.Event | None = None

    def lost_event(self) -> threading.Event:
        with self.mutex:
            if self._lost is None:
                self._lost = threading.Event()
                if self.state.lost is not None:
                    self._lost.set()
            return self._lost


class _Progress:
    """The command of an acquisition in flight, for clean-up after an
    interrupted caller."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.node: redis.Redis | None = None
        self.cid: int | None = None
        self.waiting = False
        # An acquire went out: a grant may exist that no guard records.
        self.sent = False
        # The guard of a recorded grant, until it is handed to the caller.
        self.guard: LockGuard | None = None


class LockClient:
    """Locks on the redis-lock module, for threads.

    ``LockClient(redis.Redis(...))``, a ``redis.cluster.RedisCluster`` (every
    command routes by the lock's name), or a Sentinel-managed master
    (``Sentinel(...).master_for("mymaster")``)::

        locks = LockClient(redis.Redis())
        with locks.lock("order:42"):
            ...  # the watchdog keeps the lock until the block ends

    Owner ids are ``<client id>:<thread number>`` (re-entry per thread, as in
    Redisson), or explicit with :meth:`as_owner`. One watchdog thread per
    client renews every lock taken without a lease every third of
    ``watchdog_lease``; it runs while the client holds such a lock.
    """

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
    ) -> None:
        _core.lease_ms(watchdog_lease)
        self._redis = client
        self._options = Options(
            float(watchdog_lease),
            None if command_timeout is None else float(command_timeout),
            retries,
            float(retry_interval),
            float(wait_margin),
            None if sync_replicas is None else (int(sync_replicas[0]), float(sync_replicas[1])),
        )
        self._options.sync_args()
        self._id = _core.new_client_id()
        self._owner: str | None = None
        self._registry: dict[tuple[str, str, str], _Entry] = {}
        self._cond = threading.Condition(threading.Lock())
        # The client views made by as_owner share, for the watchdog.
        self._root = self
        # When the watchdog's sleep ends (inf: awake, it rescans before sleeping),
        # and since when it has had nothing to watch.
        self._sleep_until = math.inf
        self._idle_since: float | None = None
        # The earliest due time of grants made while it was awake.
        self._pending_due = math.inf
        self._watchdog: threading.Thread | None = None
        self._wake = False

    # -- identity ---------------------------------------------------------

    @property
    def id(self) -> str:
        """This client's id: the first half of every owner id it makes."""
        return self._id

    @property
    def options(self) -> Options:
        return self._options

    def as_owner(self, owner: str) -> LockClient:
        """The same client (connections, watchdog, hold counts), acting as
        ``owner``: a worker name, a request id, or the id a Redisson
        application uses (then both re-enter each other's holds). An owner
        id must be used by one holder at a time."""
        if not owner:
            raise ValueError("an owner id must not be empty")
        view = object.__new__(LockClient)
        view.__dict__.update(self.__dict__)
        view._owner = owner
        return view

    @property
    def owner(self) -> str:
        """The owner id this client acts as now: the explicit one, or
        ``<client id>:<thread number>`` of the calling thread."""
        if self._owner is not None:
            return self._owner
        return f"{self._id}:{_core.thread_number()}"

    # -- the API ----------------------------------------------------------

    def lock(self, name: str, *, on_lost: LostCallback | None = None) -> LockGuard:
        """Takes the lock, waiting as long as it takes in the server's FIFO
        queue; the watchdog keeps it until the guard is released.
        Re-entrant per owner."""
        guard = self._acquire(name, self.owner, None, None, False, on_lost)
        assert guard is not None
        return guard

    def try_lock(
        self,
        name: str,
        wait: Number = 0,
        lease: Number | None = None,
        *,
        on_lost: LostCallback | None = None,
    ) -> LockGuard | None:
        """Tries to take the lock, waiting at most ``wait`` seconds (0: one
        attempt). With ``lease`` the lock frees itself after it and no
        watchdog runs; without, the watchdog keeps it. None when someone else
        held it for the whole wait."""
        return self._acquire(name, self.owner, lease, float(wait), False, on_lost)

    def lock_fenced(self, name: str, *, on_lost: LostCallback | None = None) -> LockGuard:
        """:meth:`lock`, with the grant's fencing token in ``guard.token``: it
        grows with every grant; the resource refuses writes with a token
        older than one it has seen (``LOCK.FENCE`` for data in Redis)."""
        guard = self._acquire(name, self.owner, None, None, True, on_lost)
        assert guard is not None
        return guard

    def try_lock_fenced(
        self,
        name: str,
        wait: Number = 0,
        lease: Number | None = None,
        *,
        on_lost: LostCallback | None = None,
    ) -> LockGuard | None:
        """:meth:`try_lock` with a fencing token (see :meth:`lock_fenced`)."""
        return self._acquire(name, self.owner, lease, float(wait), True, on_lost)

    # -- the read-write lock (Redisson's RReadWriteLock, fair) -------------

    def read_lock(self, name: str, *, on_lost: LostCallback | None = None) -> LockGuard:
        """Takes a read hold of the read-write lock ``name``, waiting in the
        server's FIFO queue (behind any queued writer); the watchdog keeps
        it. Readers share; re-entrant per owner, also by its writer (a
        downgrade)."""
        guard = self._acquire(name, self.owner, None, None, False, on_lost, READ)
        assert guard is not None
        return guard

    def write_lock(self, name: str, *, on_lost: LostCallback | None = None) -> LockGuard:
        """Takes the write hold of the read-write lock ``name``, waiting in
        the server's FIFO queue; the watchdog keeps it. Excludes readers and
        other writers; re-entrant per owner. :class:`UpgradeRefused` when
        this owner holds it for reading."""
        guard = self._acquire(name, self.owner, None, None, False, on_lost, WRITE)
        assert guard is not None
        return guard

    def try_read_lock(
        self,
        name: str,
        wait: Number = 0,
        lease: Number | None = None,
        *,
        on_lost: LostCallback | None = None,
    ) -> LockGuard | None:
        """:meth:`read_lock` waiting at most ``wait`` s (0: one attempt);
        ``lease`` as in :meth:`try_lock`. None when not granted in time."""
        return self._acquire(name, self.owner, lease, float(wait), False, on_lost, READ)

    def try_write_lock(
        self,
        name: str,
        wait: Number = 0,
        lease: Number | None = None,
        *,
        on_lost: LostCallback | None = None,
    ) -> LockGuard | None:
        """:meth:`write_lock` waiting at most ``wait`` s (0: one attempt);
        ``lease`` as in :meth:`try_lock`. None when not granted in time."""
        return self._acquire(name, self.owner, lease, float(wait), False, on_lost, WRITE)

    def write_lock_fenced(self, name: str, *, on_lost: LostCallback | None = None) -> LockGuard:
        """:meth:`write_lock` with the grant's fencing token in
        ``guard.token`` (see :meth:`lock_fenced`)."""
        guard = self._acquire(name, self.owner, None, None, True, on_lost, WRITE)
        assert guard is not None
        return guard

    def try_write_lock_fenced(
        self,
        name: str,
        wait: Number = 0,
        lease: Number | None = None,
        *,
        on_lost: LostCallback | None = None,
    ) -> LockGuard | None:
        """:meth:`try_write_lock` with a fencing token."""
        return self._acquire(name, self.owner, lease, float(wait), True, on_lost, WRITE)

    def is_locked(self, name: str) -> bool:
        """Whether anyone holds the lock."""
        return bool(self._simple(name, ["EXISTS", name]))

    def remaining_lease(self, name: str) -> float | None:
        """The lock's remaining lease in seconds, whoever holds it; None if free."""
        ms = self._simple(name, ["PTTL", name])
        return ms / 1000.0 if isinstance(ms, int) and ms >= 0 else None

    def force_unlock(self, name: str) -> bool:
        """Deletes the lock whoever holds it (``LOCK.FORCE``): an operator's
        tool; the holder is told at its watchdog's next renewal. True if a
        lock existed."""
        return bool(self._simple(name, ["LOCK.FORCE", name]) == 1)

    def info(self, name: str) -> dict[str, Any]:
        """``LOCK.INFO``: state, owners, ttl_ms, deadline_ms, waiters, token."""
        return _core.pairs(self._simple(name, ["LOCK.INFO", name]))

    # -- semaphores and latches (Redisson's RSemaphore,
    # RPermitExpirableSemaphore, RCountDownLatch) ---------------------------

    def semaphore(self, name: str) -> Semaphore:
        """The semaphore ``name`` (``LOCK.SEM*``)."""
        return Semaphore(self, name)

    def permit_semaphore(self, name: str) -> PermitExpirableSemaphore:
        """The semaphore ``name`` with leased permits (``LOCK.PERMIT*``),
        each with an id; the watchdog renews those taken without a lease."""
        return PermitExpirableSemaphore(self, name)

    def count_down_latch(self, name: str) -> CountDownLatch:
        """The count-down latch ``name`` (``LOCK.LATCH*``, ``LOCK.AWAIT``)."""
        return CountDownLatch(self, name)

    # -- connections ------------------------------------------------------

    def _node(self, name: str) -> Any:
        """The ``redis.Redis`` that serves ``name``."""
        get_node = getattr(self._redis, "get_node_from_key", None)
        if get_node is None:
            return self._redis
        node = get_node(name)
        return node.redis_connection or self._redis.get_redis_connection(node)

    def _moved(self) -> None:
        manager = getattr(self._redis, "nodes_manager", None)
        if manager is not None:
            try:
                manager.initialize()
            except Exception:
                pass

    @staticmethod
    def _get(node: Any) -> Any:
        pool = node.connection_pool
        if _core.wants_command_name(pool.get_connection):
            return pool.get_connection("LOCK")  # redis-py < 5.3
        return pool.get_connection()

    @staticmethod
    def _put(node: Any, conn: Any) -> None:
        node.connection_pool.release(conn)

    @staticmethod
    def _exec(conn: Any, args: list[Any], timeout: float | None) -> Any:
        """One command on ``conn``, its reply awaited ``timeout`` (None: the
        connection's socket timeout, or the default when it has none)."""
        conn.send_command(*args)
        own = conn.socket_timeout
        if own is None or (timeout is not None and timeout < own):
            # The socket would wait longer than allowed: poll first.
            limit = _core.short_timeout(timeout)
            if not conn.can_read(limit):
                raise rex.TimeoutError(f"no reply to {args[0]} within {limit:.3f} s")
        return conn.read_response()

    def _checkout(self, node: Any) -> tuple[Any, int | None]:
        """A connection out of ``node``'s pool and its id; on failure it
        goes back, closed."""
        conn = self._get(node)
        try:
            return conn, self._client_id(conn)
        except BaseException:
            conn.disconnect()
            self._put(node, conn)
            raise

    def _client_id(self, conn: Any) -> int | None:
        """The server's id of ``conn`` (asked once per new socket)."""
        cached = getattr(conn, "_rlc_id", None)
        sock = getattr(conn, "_sock", None)
        if cached is not None and sock is not None and cached[0] is sock:
            return int(cached[1])  # connected, and known: nothing to ask
        conn.connect()
        sock = getattr(conn, "_sock", None)
        try:
            cid = int(self._exec(conn, ["CLIENT", "ID"], self._options.command_timeout))
        except rex.ResponseError:
            return None  # NOPERM: no fence
        conn._rlc_id = (sock, cid)
        return cid

    def _simple(
        self, name: str, args: list[Any], timeout: float | None = None, retries: int | None = None
    ) -> Any:
        """A command whose resending is harmless, with retries."""
        o = self._options
        retries = o.retries if retries is None else retries
        within = o.command_timeout if timeout is None else timeout
        failure: BaseException | None = None
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(o.retry_interval)
            node = self._node(name)
            try:
                conn = self._get(node)
            except TRANSPORT as e:
                failure = e
                continue
            try:
                reply = self._exec(conn, args, within)
                self._put(node, conn)
                return reply
            except rex.ResponseError as e:
                if wrong_role(e):
                    conn.disconnect()
                    self._put(node, conn)
                    self._moved()
                    failure = e
                    continue
                self._put(node, conn)
                raise ServerError(str(e)) from e
            except TRANSPORT as e:
                conn.disconnect()
                self._put(node, conn)
                failure = e
        raise ConnectionLost(describe(failure)) from failure

    def _once(
        self, name: str, args: list[Any], blocks: bool = False, within: float | None = None
    ) -> Any:
        """A command that changes a count (a semaphore's, a latch's), so it
        is never resent once it may have run: retried only while it could
        not be sent. ``blocks``: it waits server-side (``WAIT`` / ``AWAIT``)
        up to ``within`` s (None: forever), on its connection held out of
        the pool for the wait, the reply awaited ``wait_margin`` longer.
        :class:`OutcomeUnknown` when the connection fails once it was sent."""
        o = self._options
        failure: BaseException | None = None
        for attempt in range(o.retries + 1):
            if attempt:
                time.sleep(o.retry_interval)
            node = self._node(name)
            try:
                conn = self._get(node)
            except TRANSPORT as e:
                failure = e
                continue
            try:
                conn.connect()  # nothing sent yet: a failure here is retried
            except TRANSPORT as e:
                conn.disconnect()
                self._put(node, conn)
                failure = e
                continue
            try:
                if not blocks:
                    reply = self._exec(conn, args, o.command_timeout)
                else:
                    conn.send_command(*args)
                    limit = None if within is None else _core.monotonic() + within + o.wait_margin
                    # Polled a second at a time: the thread stays interruptible.
                    while not conn.can_read(
                        1.0 if limit is None else max(0.0, min(1.0, limit - _core.monotonic()))
                    ):
                        if limit is not None and _core.monotonic() >= limit:
                            raise rex.TimeoutError(f"no reply to {args[0]} ... in time")
                    reply = conn.read_response()
                self._put(node, conn)
                return reply
            except rex.ResponseError as e:
                if wrong_role(e):  # refused: nothing ran
                    conn.disconnect()
                    self._put(node, conn)
                    self._moved()
                    failure = e
                    continue
                self._put(node, conn)
                raise ServerError(str(e)) from e
            except TRANSPORT as e:
                conn.disconnect()
                self._put(node, conn)
                raise OutcomeUnknown(name, str(args[0]), describe(e)) from e
            except BaseException:
                # Interrupted: the server drops a waiter when it reads the close.
                conn.disconnect()
                self._put(node, conn)
                raise
        raise ConnectionLost(describe(failure)) from failure

    def _hold_permits(
        self,
        name: str,
        ids: list[str],
        expires: list[float | None],
        renew_now: bool,
        watchdog: bool,
        on_lost: Callable[[str, LostReason], None],
    ) -> list[_Entry]:
        """Records granted leased permits, one entry per id (its owner is
        the id), each ending at ``expires`` (monotonic; None: gone already):
        the watchdog renews those taken without a lease with
        ``LOCK.PERMITRENEW`` and reports the end of those with one."""
        now = _core.monotonic()
        entries = []
        gone = []
        due = math.inf
        for pid, end in zip(ids, expires):
            entry = self._entry(name, pid, PERMIT)
            with entry.mutex:
                _core.grant_times(
                    entry.state,
                    now if end is None else end,
                    renew_now,
                    self._options.watchdog_lease if watchdog else None,
                    now,
                )
                entry.state.callbacks.append(_core.permit_lost_callback(on_lost, pid))
                st = entry.state
                due = min(due, min(st.expires, st.next_renewal) if watchdog else st.expires)
            entries.append(entry)
            if end is None:
                gone.append(entry)
        for entry in gone:
            self._mark_lost(entry, LostReason(LostReason.NOT_HELD))
        self._start_watchdog(due)
        return entries

    def _retire_permits(self, name: str, ids: list[str]) -> None:
        """Forgets whatever entries were recorded for ``ids`` (an acquisition
        interrupted before its guard reached the caller)."""
        for pid in ids:
            with self._cond:
                entry = self._registry.get((name, PERMIT.field(pid), PERMIT.label))
            if entry is not None:
                self._retire(entry)

    # -- hold counts ------------------------------------------------------

    def _entry(self, name: str, owner: str, kind: Kind) -> _Entry:
        with self._cond:
            entry = self._registry.get((name, kind.field(owner), kind.label))
            if entry is None:
                entry = _Entry(name, owner, kind)
                self._registry[entry.key] = entry
            return entry

    def _retire(self, entry: _Entry) -> None:
        with entry.mutex:
            entry.state.retired = True
        with self._cond:
            if self._registry.get(entry.key) is entry:
                del self._registry[entry.key]

    def _mark_lost(self, entry: _Entry, why: LostReason) -> None:
        self._retire(entry)
        with entry.mutex:
            if entry.state.lost is not None:
                return
            entry.state.lost = why
            callbacks = list(entry.state.callbacks)
            event = entry._lost
        if event is not None:
            event.set()
        for cb in callbacks:
            try:
                cb(why)
            except Exception:
                pass

    def _expire_if_due(self, entry: _Entry) -> None:
        with entry.mutex:
            why = _core.lost_if_expired(entry.state, _core.monotonic())
        if why is not None:
            self._mark_lost(entry, why)

    def _read_back(self, name: str, owner: str, field: str, dead: int | None, waited: bool) -> int:
        """The server's hold count of ``owner`` (its hash field ``field``)
        after a failure in transit on the connection with id ``dead``:
        fences it first."""
        o = self._options
        last: BaseException | None = None
        for attempt in range(o.retries + 1):
            if attempt:
                time.sleep(o.retry_interval)
            node = self._node(name)
            try:
                conn = self._get(node)
            except TRANSPORT as e:
                last = e
                continue
            try:
                fenced = False
                if dead is not None:
                    try:
                        self._exec(conn, ["CLIENT", "KILL", "ID", dead], o.command_timeout)
                        fenced = True
                    except rex.ResponseError:
                        fenced = False  # NOPERM
                if waited and not fenced:
                    self._await_dequeued(conn, name, owner)
                count = _core.hold_count(self._exec(conn, ["HGET", name, field], o.command_timeout))
                self._put(node, conn)
                return count
            except TRANSPORT as e:
                conn.disconnect()
                self._put(node, conn)
                last = e
            except rex.ResponseError as e:
                self._put(node, conn)
                last = e
        raise Uncertain(name, f"reading the hold count back: {describe(last)}")

    def _await_dequeued(self, conn: Any, name: str, owner: str) -> None:
        """Without a kill, the dropped waiter leaves the queue when the
        server reads its close: poll ``LOCK.INFO`` until then."""
        deadline = _core.monotonic() + _core.short_timeout(self._options.command_timeout)
        while _core.monotonic() < deadline:
            info = self._exec(conn, ["LOCK.INFO", name], self._options.command_timeout)
            if not _core.waiters_include(info, owner):
                return
            time.sleep(0.005)

    def _run_counted(
        self,
        name: str,
        owner: str,
        field: str,
        args: list[Any],
        known: int,
        applied: int,
        within: float | None,
        progress: _Progress | None = None,
    ) -> tuple[bool, Any]:
        """Runs a command that moves ``owner``'s count (hash field ``field``)
        from ``known`` to ``applied``, resending it only when the server shows it did not run.
        (True, reply), or (False, None) when it ran but its reply was lost."""
        o = self._options
        attempt = 0
        while True:
            node = self._node(name)
            failure: BaseException
            try:
                conn, cid = self._checkout(node)
            except TRANSPORT as e:
                # Nothing of this command was sent.
                attempt += 1
                if attempt > o.retries:
                    raise ConnectionLost(describe(e)) from e
                time.sleep(o.retry_interval)
                continue
            if progress is not None:
                progress.node, progress.conn, progress.cid = node, conn, cid
                progress.sent = True
            try:
                reply = self._exec(conn, args, within)
                self._put(node, conn)
                if progress is not None:
                    progress.conn = None
                return True, reply
            except rex.ResponseError as e:
                if progress is not None:
                    progress.conn = None
                if wrong_role(e):
                    conn.disconnect()
                    self._put(node, conn)
                    self._moved()
                    attempt += 1
                    if attempt > o.retries:
                        raise ConnectionLost(describe(e)) from e
                    time.sleep(o.retry_interval)
                    continue
                self._put(node, conn)
                raise refused(name, e) from e
            except TRANSPORT as e:
                failure = e
            conn.disconnect()
            self._put(node, conn)
            if progress is not None:
                progress.conn = None
            found = self._read_back(name, owner, field, cid, False)
            if found == applied:
                return False, None
            if found != known:
                raise HoldCountMismatch(name, [known, applied], found)
            attempt += 1
            if attempt > o.retries:
                raise ConnectionLost(describe(failure)) from failure
            time.sleep(o.retry_interval)

    def _read_token(self, name: str) -> int | None:
        v = self._simple(name, ["GET", _core.token_key(name)])
        return None if v is None else int(v)

    # -- acquiring --------------------------------------------------------

    def _acquire(
        self,
        name: str,
        owner: str,
        lease: Number | None,
        wait: float | None,
        fenced: bool,
        on_lost: LostCallback | None,
        kind: Kind = LOCK,
    ) -> LockGuard | None:
        """The one acquisition path, for every kind of hold. ``wait``: None
        waits forever, 0 is one attempt. An exception that interrupts it
        (KeyboardInterrupt, a timeout signal) leaves no grant behind, also
        one already recorded whose guard was not yet returned."""
        watchdog = lease is None
        lease_s = float(self._options.watchdog_lease if lease is None else lease)
        ms = _core.lease_ms(lease_s)
        if not owner:
            raise ValueError("an owner id must not be empty")
        started = _core.monotonic()
        deadline = None if wait is None else started + max(0.0, wait)
        sync = self._options.sync_args() if kind.syncable else None
        within = self._options.acquire_timeout() if kind.syncable else self._options.command_timeout
        while True:
            entry = self._entry(name, owner, kind)
            with entry.op:
                if entry.state.retired:
                    continue
                known = entry.state.holds
                progress = _Progress()
                try:
                    sent = _core.monotonic()
                    args = _core.acquire_args(name, owner, ms, None, fenced, sync, kind)
                    seen, reply = self._run_counted(
                        name, owner, entry.field, args, known, known + 1, within, progress
                    )
                    if seen:
                        granted, token = self._parse(reply, fenced)
                    else:
                        granted, token = True, (self._read_token(name) if fenced else None)
                    if granted:
                        return self._granted(
                            entry, sent, lease_s, watchdog, token, on_lost, progress
                        )
                    if wait is not None and wait <= 0:
                        if known == 0:
                            self._retire_if_empty(entry)
                        return None
                    guard = self._wait_for(
                        entry,
                        known,
                        ms,
                        lease_s,
                        watchdog,
                        deadline,
                        fenced,
                        progress,
                        on_lost,
                        sync,
                    )
                    if guard is None and known == 0:
                        self._retire_if_empty(entry)
                    return guard
                except BaseException as e:
                    if progress.conn is None and isinstance(e, Exception):
                        # A failure reported as such: nothing is in flight.
                        if known == 0:
                            self._retire_if_empty(entry)
                        raise
                    # Interrupted (KeyboardInterrupt...): clean up first.
                    self._abandon(entry, known, progress)
                    raise

    def _retire_if_empty(self, entry: _Entry) -> None:
        with entry.mutex:
            empty = entry.state.holds == 0
        if empty:
            self._retire(entry)

    @staticmethod
    def _parse(reply: Any, fenced: bool) -> tuple[bool, int | None]:
        try:
            return _core.parse_acquire(reply, fenced)
        except _core.ProtocolError as e:
            raise ProtocolViolation(str(e)) from e

    def _abandon(self, entry: _Entry, known: int, progress: _Progress) -> None:
        """After an interrupted acquisition: a command still in flight is cut
        and fenced, and a grant it made is given back; so is one recorded
        whose guard never reached the caller (with ``entry.op`` held)."""
        with entry.mutex:
            recorded = entry.state.holds != known
        if recorded:
            # Interrupted between recording the grant and returning its
            # guard: the caller has no guard, so the hold is given back here
            # (the guard, if made, is disarmed so its collection does not
            # release a second time).
            guard = progress.guard
            if guard is not None:
                guard._released = True
            try:
                self._release_locked(entry)
            except Exception:
                pass  # lost already, or unreachable: the lease ends on its own
            return
        conn, node = progress.conn, progress.node
        if conn is not None or progress.sent:
            # A command still in flight is cut (and fenced by the read-back);
            # one that completed may have granted what nothing recorded
            # (interrupted while measuring the lease or reading the token).
            if conn is not None:
                progress.conn = None
                try:
                    conn.disconnect()
                    self._put(node, conn)
                except Exception:
                    pass
            try:
                found = self._read_back(
                    entry.name,
                    entry.owner,
                    entry.field,
                    progress.cid if conn is not None else None,
                    progress.waiting and conn is not None,
                )
                if found == known + 1:
                    self._run_counted(
                        entry.name,
                        entry.owner,
                        entry.field,
                        _core.release_args(entry.kind, entry.name, entry.owner, 1, None),
                        known + 1,
                        known,
                        self._options.command_timeout,
                    )
            except Exception:
                pass
        if known == 0:
            self._retire_if_empty(entry)

    def _wait_for(
        self,
        entry: _Entry,
        known: int,
        ms: int,
        lease: float,
        watchdog: bool,
        deadline: float | None,
        fenced: bool,
        progress: _Progress,
        on_lost: LostCallback | None,
        sync: tuple[int, int] | None,
    ) -> LockGuard | None:
        """The acquire ``... WAIT`` on a connection of its own (held out of
        the pool for the wait), the reply awaited ``wait_margin`` longer."""
        o = self._options
        name, owner = entry.name, entry.owner
        attempt = 0
        while True:
            remaining: float | None = None
            if deadline is not None:
                remaining = deadline - _core.monotonic()
                if remaining <= 0:
                    return None
            args = _core.acquire_args(
                name,
                owner,
                ms,
                0 if remaining is None else _core.wait_ms(remaining),
                fenced,
                sync,
                entry.kind,
            )
            node = self._node(name)
            try:
                conn, cid = self._checkout(node)
            except TRANSPORT as e:
                attempt += 1
                if attempt > o.retries:
                    raise ConnectionLost(describe(e)) from e
                time.sleep(o.retry_interval)
                continue
            progress.node, progress.conn, progress.cid = node, conn, cid
            progress.sent = True
            progress.waiting = True
            sent = _core.monotonic()
            failure: BaseException
            try:
                conn.send_command(*args)
                # Polled a second at a time, so the thread stays interruptible
                # (KeyboardInterrupt); a wait without end relies on TCP
                # keep-alive to notice a vanished server.
                extra = o.wait_margin + (o.sync_time() if sync is not None else 0.0)
                limit = None if remaining is None else sent + remaining + extra
                while not conn.can_read(
                    1.0 if limit is None else max(0.0, min(1.0, limit - _core.monotonic()))
                ):
                    if limit is not None and _core.monotonic() >= limit:
                        raise rex.TimeoutError(f"no reply to {args[0]} ... WAIT in time")
                reply = conn.read_response()
                progress.conn = None
                self._put(node, conn)
                granted, token = self._parse(reply, fenced)
                if not granted:
                    return None
                return self._granted(entry, sent, lease, watchdog, token, on_lost, progress)
            except rex.ResponseError as e:
                if not wrong_role(e):
                    progress.conn = None
                    self._put(node, conn)
                    raise refused(name, e) from e
                failure = e
            except TRANSPORT as e:
                failure = e
            # Broken while waiting: was the lock granted at that instant?
            progress.conn = None
            conn.disconnect()
            self._put(node, conn)
            found = self._read_back(name, owner, entry.field, cid, True)
            if found == known + 1:
                token = self._read_token(name) if fenced else None
                return self._granted(entry, sent, lease, watchdog, token, on_lost, progress)
            if found != known:
                raise HoldCountMismatch(name, [known, known + 1], found)
            if wrong_role(failure):
                self._moved()
            attempt += 1
            if attempt > o.retries:
                raise ConnectionLost(describe(failure)) from failure
            time.sleep(o.retry_interval)

    def _grant_expiry(
        self, name: str, field: str, sent: float, lease: float
    ) -> tuple[float, bool, bool]:
        """(expires, renew now, gone): the lease runs from the grant, which
        the client knows only as 'after the request'. A reply within a third
        of the lease counts from the request; a later one is measured."""
        received = _core.monotonic()
        if received < sent + lease / 3:
            return sent + lease, False, False
        asked = _core.monotonic()
        try:
            left = _core.lease_left(self._simple(name, ["LOCK.INFO", name]), field)
        except LockError:
            left = None
        if left is None:
            return received + lease, True, False
        holds, ttl = left
        if not holds:
            return asked, True, True
        return asked + min(ttl, lease), False, False

    def _granted(
        self,
        entry: _Entry,
        sent: float,
        lease: float,
        watchdog: bool,
        token: int | None,
        on_lost: LostCallback | None,
        progress: _Progress,
    ) -> LockGuard:
        expires, renew_now, gone = self._grant_expiry(entry.name, entry.field, sent, lease)
        # Made disarmed before the grant is recorded, armed as the last step:
        # an interruption in between leaves _abandon a guard to disarm.
        guard = LockGuard(self, entry, token)
        guard._released = True
        progress.guard = guard
        with entry.mutex:
            _core.grant_times(
                entry.state,
                expires,
                renew_now,
                self._options.watchdog_lease if watchdog else None,
                _core.monotonic(),
            )
            if on_lost is not None:
                entry.state.callbacks.append(on_lost)
        if gone:
            self._mark_lost(entry, LostReason(LostReason.NOT_HELD))
        with entry.mutex:
            st = entry.state
            due = min(st.expires, st.next_renewal) if st.watchdog is not None else st.expires
        self._start_watchdog(due)
        guard._released = False
        return guard

    # -- releasing --------------------------------------------------------

    def _release(self, entry: _Entry) -> None:
        with entry.op:
            self._release_locked(entry)

    def _release_locked(self, entry: _Entry) -> None:
        """Gives one hold back, with ``entry.op`` held."""
        with entry.mutex:
            known, renew, lost = (entry.state.holds, entry.state.watchdog, entry.state.retired)
            if known == 0:
                raise NotHeld(entry.name)
            if lost:
                entry.state.holds -= 1
                raise NotHeld(entry.name)
        args = _core.release_args(entry.kind, entry.name, entry.owner, known, renew)
        try:
            seen, reply = self._run_counted(
                entry.name,
                entry.owner,
                entry.field,
                args,
                known,
                known - 1,
                self._options.command_timeout,
            )
        except HoldCountMismatch as e:
            if e.found != 0:
                raise
            seen, reply = True, None
        if seen and reply not in (None, 0, 1):
            raise ProtocolViolation(f"{args[0]} answered {reply!r}")
        held = not seen or reply is not None
        with entry.mutex:
            entry.state.holds = entry.state.holds - 1 if held else 0
            holds = entry.state.holds
        if not held:
            self._mark_lost(entry, LostReason(LostReason.NOT_HELD))
            raise NotHeld(entry.name)
        if holds == 0:
            self._retire(entry)

    # -- the watchdog -----------------------------------------------------

    def _start_watchdog(self, due: float) -> None:
        """Makes sure the watchdog runs, and wakes it if ``due`` (a new
        grant's next renewal or end) comes before its sleep ends."""
        root = self._root
        with self._cond:
            if root._sleep_until == math.inf:
                # Awake: taken into account before it sleeps again.
                root._pending_due = min(root._pending_due, due)
            elif due < root._sleep_until:
                root._wake = True
                self._cond.notify_all()
            if root._watchdog is None:
                t = threading.Thread(
                    target=_watchdog_main,
                    args=(root,),
                    name=f"redis-lock-watchdog-{self._id[:8]}",
                    daemon=True,
                )
                root._watchdog = t
                t.start()

    def _watchdog_round(self) -> float | None:
        """One pass: declares what expired, starts the renewals that are due
        (each in a thread of its own, so a renewal stuck connecting to a
        frozen server never delays telling the holder). The time to sleep,
        or None when nothing is held (the thread ends)."""
        now = _core.monotonic()
        with self._cond:
            entries = list(self._registry.values())
            if not entries:
                # Kept a while, so a client that locks and unlocks in a loop
                # does not start a thread per lock.
                if self._idle_since is None:
                    self._idle_since = now
                if now - self._idle_since < WATCHDOG_IDLE:
                    return WATCHDOG_IDLE
                self._watchdog = None
                return None
            self._idle_since = None
        next_at = now + 3600.0
        for entry in entries:
            start: float | None = None
            with entry.mutex:
                st = entry.state
                if st.retired or st.holds == 0:
                    continue
                why = _core.lost_if_expired(st, now)
                if why is None:
                    next_at = min(next_at, st.expires)
                    if st.watchdog is not None and not st.renewing:
                        if st.next_renewal <= now:
                            st.renewing = True
                            start = st.watchdog
                        else:
                            next_at = min(next_at, st.next_renewal)
            if why is not None:
                self._mark_lost(entry, why)
            elif start is not None:
                threading.Thread(
                    target=self._renew, args=(entry, start), daemon=True, name="redis-lock-renewal"
                ).start()
        return max(0.0, next_at - _core.monotonic())

    def _renew(self, entry: _Entry, lease: float) -> None:
        """One renewal: 1 extends the lease from when it was sent, 0 marks
        the lock lost at once, a failure is retried every tenth of the lease
        (the watchdog declares the loss once the lease has passed)."""
        sent = _core.monotonic()
        result: bool | None = None
        error: BaseException | None = None
        try:
            reply = self._simple(
                entry.name,
                [entry.kind.renew, entry.name, entry.owner, _core.lease_ms(lease)],
                timeout=min(_core.short_timeout(self._options.command_timeout), lease / 3),
                retries=0,
            )
            if reply not in (0, 1):
                raise ProtocolViolation(f"{entry.kind.renew} answered {reply!r}")
            result = reply == 1
        except LockError as e:
            error = e
        except Exception as e:  # noqa: BLE001 - a renewal must never kill the watchdog
            error = e
        lost = False
        with entry.mutex:
            st = entry.state
            st.renewing = False
            if st.retired or st.holds == 0:
                return  # released meanwhile: its renewal proves nothing
            if result is True:
                st.expires = sent + lease
                st.next_renewal = sent + lease / 3
                st.last_error = None
            elif result is False:
                lost = True
            else:
                st.last_error = describe(error)
                st.next_renewal = min(_core.monotonic() + _core.retry_after(lease), st.expires)
        if lost:
            self._mark_lost(entry, LostReason(LostReason.NOT_HELD))
        with self._cond:
            self._root._wake = True
            self._cond.notify_all()

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            seconds = min(seconds, self._pending_due - _core.monotonic())
            self._pending_due = math.inf
            if seconds > 0 and not self._wake:
                self._sleep_until = _core.monotonic() + seconds
                self._cond.wait(seconds)
                self._sleep_until = math.inf
            self._wake = False


def _watchdog_main(client: LockClient) -> None:
    # Runs while the client holds something (a strong reference: held locks
    # keep being renewed), and ends when nothing is held.
    while True:
        pause = client._watchdog_round()
        if pause is None:
            return
        client._sleep(min(pause, 3600.0))


def _release_quietly(client: LockClient, entry: _Entry) -> None:
    try:
        client._release(entry)
    except Exception:
        pass  # lost already, or unreachable: the lease ends on its own


class LockGuard:
    """One hold of a lock: :meth:`unlock` gives it back (also on leaving a
    ``with`` block). ``lost`` is a :class:`threading.Event` set the moment the
    client learns the lock is gone (renewal answered 0, renewals failing for
    a whole lease, a caller-given lease ending); ``lost_reason`` says why.

    A guard dropped without :meth:`unlock` (garbage-collected) is released in
    the background, so a forgotten guard is never renewed for ever."""

    def __init__(self, client: LockClient, entry: _Entry, token: int | None) -> None:
        self._client = client
        self._entry = entry
        self._released = False
        # Released when garbage-collected unreleased (ModuleLock turns it off
        # for locks with a timeout, as redis-py keeps those).
        self._release_on_gc = True
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

    @property
    def lost(self) -> threading.Event:
        """Set when the lock is lost: wait on it, or poll ``lost.is_set()``."""
        self._client._expire_if_due(self._entry)
        return self._entry.lost_event()

    @property
    def lost_reason(self) -> LostReason | None:
        """Why the lock was lost, or None while it is not known lost."""
        self._client._expire_if_due(self._entry)
        with self._entry.mutex:
            return self._entry.state.lost

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: LostCallback) -> None:
        """Calls ``callback(reason)`` when the lock is lost (from the watchdog
        thread; at once if it already is)."""
        with self._entry.mutex:
            why = self._entry.state.lost
            if why is None:
                self._entry.state.callbacks.append(callback)
        if why is not None:
            callback(why)

    def is_held(self) -> bool:
        """Asks the server whether this owner still holds the lock."""
        v = self._client._simple(self.name, ["HGET", self.name, self._entry.field])
        return _core.hold_count(v) > 0

    def remaining_lease(self) -> float | None:
        """The lease left on the server (s), None if not held by this owner."""
        if not self.is_held():
            return None
        return self._client.remaining_lease(self.name)

    def unlock(self) -> None:
        """Gives this hold back; :class:`NotHeld` if the lock was lost."""
        if self._released:
            raise NotHeld(self.name)
        self._released = True
        self._client._release(self._entry)

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not self._release_on_gc:
            return
        self._released = True
        if not threading.main_thread().is_alive():
            return  # interpreter shutdown: the lease ends on its own
        try:
            threading.Thread(
                target=_release_quietly, args=(self._client, self._entry), daemon=True
            ).start()
        except Exception:
            pass  # interpreter shutdown: the lease ends on its own

    def __enter__(self) -> LockGuard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._released:
            return
        try:
            self.unlock()
        except NotHeld:
            if et is None:
                raise

    def __repr__(self) -> str:
        return (
            f"LockGuard(name={self.name!r}, owner={self.owner!r}, kind={self.kind!r}, "
            f"token={self.token!r})"
        )
