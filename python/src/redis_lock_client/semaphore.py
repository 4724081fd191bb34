"""Semaphores on the redis-lock module (threads, and ``Async*`` for asyncio).

* :class:`Semaphore`: Redisson's ``RSemaphore`` (``LOCK.SEM*``): a count of
  permits, taken and given back by anyone; waits are server-side, FIFO.
* :class:`PermitExpirableSemaphore`: Redisson's
  ``RPermitExpirableSemaphore`` (``LOCK.PERMIT*``): each permit taken has an
  id and a lease; the server takes it back when the lease ends. Taken
  without a lease, the client's watchdog renews it (``LOCK.PERMITRENEW``)
  and the :class:`Permits` guard's ``lost`` is set if the server no longer
  has it.

Commands that change a count are never resent once they may have run: a
connection that fails after sending one raises :class:`OutcomeUnknown`.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import LostReason, Number
from .errors import NotHeld, OutcomeUnknown, PermitsNotHeld, ProtocolViolation, ServerError

if TYPE_CHECKING:
    from ._async import AsyncLockClient
    from ._async import _Entry as _AsyncEntry
    from ._sync import LockClient, _Entry


def _weak(guard: _PermitsBase) -> Callable[[str, LostReason], None]:
    """The guard's loss handler, held weakly by the client's entries: a
    guard dropped unreleased is collected (and released), not renewed for
    ever."""
    ref = weakref.ref(guard)

    def on_lost(pid: str, why: LostReason) -> None:
        g = ref()
        if g is not None:
            g._on_lost(pid, why)

    return on_lost


def _int(command: str, reply: Any) -> int:
    try:
        return _core.integer(command, reply)
    except _core.ProtocolError as e:
        raise ProtocolViolation(str(e)) from e


def _flag(command: str, reply: Any) -> bool:
    try:
        return _core.flag(command, reply)
    except _core.ProtocolError as e:
        raise ProtocolViolation(str(e)) from e


def _ids(reply: Any, permits: int) -> list[str] | None:
    try:
        return _core.permit_ids(reply, permits)
    except _core.ProtocolError as e:
        raise ProtocolViolation(str(e)) from e


def _info(reply: Any) -> dict[str, Any] | None:
    try:
        return _core.sem_info(reply)
    except _core.ProtocolError as e:
        raise ProtocolViolation(str(e)) from e


def _wait_plan(wait: Number | None) -> tuple[int | None, float | None, bool]:
    """(WAIT ms or None, seconds the server may wait, blocks) of a try."""
    if wait is None or wait <= 0:
        return None, None, False
    return _core.wait_ms(wait), float(wait), True


def _score_args(name: str, ids: list[str]) -> list[Any]:
    return ["ZMSCORE", _core.timeout_key(name), *[bytes.fromhex(i) for i in ids]]


def _left(time_reply: Any, scores: Any) -> list[float | None]:
    """Seconds of lease left per permit, from the server's ``TIME`` and the
    permits' deadlines (None: not held)."""
    now_ms = int(time_reply[0]) * 1000 + int(time_reply[1]) // 1000
    return [None if s is None else max(0.0, float(s) - now_ms) / 1000.0 for s in scores]


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------


class _SemaphoreBase:
    def __init__(self, client: LockClient, name: str) -> None:
        self._client = client
        self.name = name

    def try_set_permits(self, permits: int, ttl: Number | None = None) -> bool:
        """Sets the number of permits if the semaphore does not exist
        (``LOCK.SEMSET``; with ``ttl`` s it expires). False if it exists."""
        args = _core.sem_set_args(self.name, permits, ttl)
        return _flag(args[0], self._client._once(self.name, args))

    def add_permits(self, delta: int) -> int:
        """Adds ``delta`` permits (may be negative; a missing semaphore
        counts as 0). The new number available."""
        args = _core.sem_add_args(self.name, delta)
        return _int(args[0], self._client._once(self.name, args))

    def available_permits(self) -> int:
        """The permits free now (0 when the semaphore does not exist)."""
        return _int(
            "LOCK.SEMAVAILABLE", self._client._simple(self.name, ["LOCK.SEMAVAILABLE", self.name])
        )

    def drain_permits(self) -> int:
        """Takes every free permit; how many it took."""
        return _int("LOCK.SEMDRAIN", self._client._once(self.name, ["LOCK.SEMDRAIN", self.name]))

    def info(self) -> dict[str, Any] | None:
        """``LOCK.SEMINFO``: ``available``, ``ttl_ms``, ``permits`` (``(id,
        deadline unix ms or -1)``), ``waiters`` (dicts ``wants``,
        ``permits``, ``waited_ms``, ``timeout_ms``)."""
        return _info(self._client._simple(self.name, ["LOCK.SEMINFO", self.name]))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Semaphore(_SemaphoreBase):
    """Redisson's ``RSemaphore`` on the module: ``LockClient.semaphore(name)``.

    ::

        sem = locks.semaphore("pool")
        sem.try_set_permits(3)
        sem.acquire()  # waits in the server's FIFO queue
        try:
            ...
        finally:
            sem.release()

    Permits belong to nobody: any caller may release them. A newcomer never
    overtakes a waiter, even one that wants more than is free.
    """

    def acquire(self, permits: int = 1) -> None:
        """Takes ``permits``, waiting as long as it takes (server-side,
        ``WAIT 0``, on a connection of its own)."""
        args = _core.sem_acquire_args(self.name, permits, 0)
        if not _flag(args[0], self._client._once(self.name, args, True, None)):
            raise ProtocolViolation(f"{args[0]} ... WAIT 0 answered 0")

    def try_acquire(self, permits: int = 1, wait: Number | None = None) -> bool:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt, no wait). False when not."""
        ms, within, blocks = _wait_plan(wait)
        args = _core.sem_acquire_args(self.name, permits, ms)
        return _flag(args[0], self._client._once(self.name, args, blocks, within))

    def release(self, permits: int = 1) -> int:
        """Gives ``permits`` back (they go to the head of the queue at once);
        the count after the release, before waiters took their share."""
        args = _core.sem_release_args(self.name, permits)
        return _int(args[0], self._client._once(self.name, args))


class PermitExpirableSemaphore(_SemaphoreBase):
    """Redisson's ``RPermitExpirableSemaphore`` on the module:
    ``LockClient.permit_semaphore(name)``.

    ::

        sem = locks.permit_semaphore("workers")
        sem.try_set_permits(2)
        with sem.acquire() as permits:  # the watchdog keeps them
            ...  # permits.ids; permits.lost is set if they are lost

    With ``lease`` s the server takes the permits back at its end (no
    watchdog; ``lost`` is set then).
    """

    def acquire(
        self,
        permits: int = 1,
        lease: Number | None = None,
        *,
        on_lost: _core.LostCallback | None = None,
    ) -> Permits:
        """Takes ``permits``, waiting as long as it takes (server-side FIFO,
        on a connection of its own)."""
        guard = self._acquire(permits, lease, 0, None, True, on_lost)
        if guard is None:
            raise ProtocolViolation("LOCK.PERMITACQUIRE ... WAIT 0 answered nil")
        return guard

    def try_acquire(
        self,
        permits: int = 1,
        lease: Number | None = None,
        wait: Number | None = None,
        *,
        on_lost: _core.LostCallback | None = None,
    ) -> Permits | None:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt). None when not."""
        ms, within, blocks = _wait_plan(wait)
        return self._acquire(permits, lease, ms, within, blocks, on_lost)

    def release(self, *ids: str) -> int:
        """Releases permits by id (taken by anyone): how many.
        :class:`ServerError` naming an id not held, and nothing released."""
        args = _core.permit_release_args(self.name, [i.lower() for i in ids])
        return _int(args[0], self._client._once(self.name, args))

    def _acquire(
        self,
        permits: int,
        lease: Number | None,
        wait: int | None,
        within: float | None,
        blocks: bool,
        on_lost: _core.LostCallback | None,
    ) -> Permits | None:
        c = self._client
        watchdog = lease is None
        lease_s = float(c.options.watchdog_lease if lease is None else lease)
        args = _core.permit_acquire_args(self.name, permits, _core.lease_ms(lease_s), wait)
        sent = _core.monotonic()
        ids = _ids(c._once(self.name, args, blocks, within), permits)
        if ids is None:
            return None
        try:
            expires: list[float | None] = [sent + lease_s] * len(ids)
            late = _core.monotonic() >= sent + lease_s / 3
            if late:
                # The lease ran from a grant somewhere in a long wait: measured.
                asked = _core.monotonic()
                try:
                    left = _left(
                        c._simple(self.name, ["TIME"]),
                        c._simple(self.name, _score_args(self.name, ids)),
                    )
                    expires = [None if x is None else asked + x for x in left]
                except Exception:
                    # Unknown: the earliest end the lease can have (the grant
                    # came after ``sent``), as computed above; ``late`` has the
                    # watchdog renew at once. Not "ending now": that would call
                    # the permits lost and the guard would never give them back.
                    pass
            guard = Permits(c, self.name, ids)
            if on_lost is not None:
                guard._callbacks.append(on_lost)
            guard._entries = c._hold_permits(self.name, ids, expires, late, watchdog, _weak(guard))
            return guard
        except BaseException:
            # Interrupted (KeyboardInterrupt...) with the permits granted and
            # no guard handed out: given back here.
            c._retire_permits(self.name, ids)
            try:
                # Best effort: if it fails, the leases end them.
                c._once(self.name, _core.permit_release_args(self.name, ids))
            except Exception:
                pass
            raise


class _PermitsBase:
    """What the sync and asyncio guards share: the ids and the loss."""

    def __init__(self, name: str, ids: list[str]) -> None:
        self.name = name
        #: The permits' ids (32 hex characters each).
        self.ids = tuple(ids)
        self._released = False
        self._reasons: dict[str, LostReason] = {}
        self._callbacks: list[_core.LostCallback] = []

    def _note_lost(self, pid: str, why: LostReason) -> list[_core.LostCallback]:
        """Records a loss; the callbacks to call (outside any mutex) when it
        is the first."""
        first = not self._reasons
        self._reasons.setdefault(pid, why)
        return list(self._callbacks) if first else []

    @staticmethod
    def _call(callbacks: list[_core.LostCallback], why: LostReason) -> None:
        for cb in callbacks:
            try:
                cb(why)
            except Exception:
                pass

    def _on_lost(self, pid: str, why: LostReason) -> None:
        raise NotImplementedError

    @property
    def lost_ids(self) -> list[str]:
        """The ids known lost."""
        return [i for i in self.ids if i in self._reasons]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, ids={list(self.ids)!r})"


class Permits(_PermitsBase):
    """Leased permits of a :class:`PermitExpirableSemaphore`: :meth:`release`
    gives them back (also on leaving a ``with`` block). ``lost`` is a
    :class:`threading.Event` set when the client learns that one of them is
    gone (a renewal answered 0, renewals failing for a whole lease, a
    caller-given lease ending, a release that found it gone)."""

    def __init__(self, client: LockClient, name: str, ids: list[str]) -> None:
        super().__init__(name, ids)
        self._client = client
        self._entries: list[_Entry] = []
        self._mutex = threading.Lock()
        self._lost = threading.Event()

    def _on_lost(self, pid: str, why: LostReason) -> None:
        with self._mutex:
            callbacks = self._note_lost(pid, why)
        self._lost.set()
        self._call(callbacks, why)

    def _expire_if_due(self) -> None:
        for e in self._entries:
            self._client._expire_if_due(e)

    @property
    def lost(self) -> threading.Event:
        """Set when a permit is lost: wait on it, or poll ``lost.is_set()``."""
        self._expire_if_due()
        return self._lost

    @property
    def lost_reason(self) -> LostReason | None:
        """Why the first lost permit was lost, or None."""
        self._expire_if_due()
        with self._mutex:
            return next(iter(self._reasons.values()), None)

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: _core.LostCallback) -> None:
        """Calls ``callback(reason)`` at the first loss (from the watchdog
        thread; at once if one is already known)."""
        with self._mutex:
            why = next(iter(self._reasons.values()), None)
            if why is None:
                self._callbacks.append(callback)
        if why is not None:
            callback(why)

    def release(self) -> None:
        """Gives the permits back (``LOCK.PERMITRELEASE``); those still held
        are released even when some are gone, then :class:`PermitsNotHeld`
        names the gone ones."""
        if self._released:
            raise PermitsNotHeld(self.name, list(self.ids))
        self._released = True
        c = self._client
        pending: list[str] = []
        gone: list[str] = []
        by_id = {e.owner: e for e in self._entries}
        for e in self._entries:
            with e.mutex:
                known_lost = e.state.lost is not None
            # Retired first: a renewal racing the release proves nothing.
            c._retire(e)
            (gone if known_lost else pending).append(e.owner)
        attempts = 0
        while pending:
            args = _core.permit_release_args(self.name, pending)
            try:
                n = _int(args[0], c._once(self.name, args))
                if n != len(pending):
                    raise ProtocolViolation(f"{args[0]} of {len(pending)} answered {n}")
                break
            except ServerError as e:
                pid = _core.not_held_id(str(e))
                if pid is None or pid not in pending:
                    raise
                pending.remove(pid)
                gone.append(pid)
                c._mark_lost(by_id[pid], LostReason(LostReason.NOT_HELD))
            except OutcomeUnknown:
                attempts += 1
                if attempts > c.options.retries:
                    raise
                # Those still in the set were not released: only they go again.
                scores = c._simple(self.name, _score_args(self.name, pending))
                pending = [p for p, s in zip(pending, scores) if s is not None]
        if gone:
            raise PermitsNotHeld(self.name, gone)

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not getattr(self, "_entries", None):
            return
        if not threading.main_thread().is_alive():
            return  # interpreter shutdown: the leases end on their own
        try:
            threading.Thread(target=_release_quietly, args=(self,), daemon=True).start()
        except Exception:
            pass  # interpreter shutdown: the leases end on their own

    def __enter__(self) -> Permits:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._released:
            return
        try:
            self.release()
        except NotHeld:
            if et is None:
                raise


def _release_quietly(guard: Permits) -> None:
    try:
        guard.release()
    except Exception:
        pass  # lost already, or unreachable: the leases end on their own


# ---------------------------------------------------------------------------
# asyncio
# ---------------------------------------------------------------------------


class _AsyncSemaphoreBase:
    def __init__(self, client: AsyncLockClient, name: str) -> None:
        self._client = client
        self.name = name

    async def try_set_permits(self, permits: int, ttl: Number | None = None) -> bool:
        """Sets the number of permits if the semaphore does not exist
        (``LOCK.SEMSET``; with ``ttl`` s it expires). False if it exists."""
        args = _core.sem_set_args(self.name, permits, ttl)
        return _flag(args[0], await self._client._once(self.name, args))

    async def add_permits(self, delta: int) -> int:
        """Adds ``delta`` permits (may be negative); the new number available."""
        args = _core.sem_add_args(self.name, delta)
        return _int(args[0], await self._client._once(self.name, args))

    async def available_permits(self) -> int:
        """The permits free now (0 when the semaphore does not exist)."""
        reply = await self._client._simple(self.name, ["LOCK.SEMAVAILABLE", self.name])
        return _int("LOCK.SEMAVAILABLE", reply)

    async def drain_permits(self) -> int:
        """Takes every free permit; how many it took."""
        reply = await self._client._once(self.name, ["LOCK.SEMDRAIN", self.name])
        return _int("LOCK.SEMDRAIN", reply)

    async def info(self) -> dict[str, Any] | None:
        """``LOCK.SEMINFO`` (see :meth:`Semaphore.info`)."""
        return _info(await self._client._simple(self.name, ["LOCK.SEMINFO", self.name]))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class AsyncSemaphore(_AsyncSemaphoreBase):
    """:class:`Semaphore` for asyncio: ``AsyncLockClient.semaphore(name)``."""

    async def acquire(self, permits: int = 1) -> None:
        """Takes ``permits``, waiting as long as it takes (server-side)."""
        args = _core.sem_acquire_args(self.name, permits, 0)
        if not _flag(args[0], await self._client._once(self.name, args, True, None)):
            raise ProtocolViolation(f"{args[0]} ... WAIT 0 answered 0")

    async def try_acquire(self, permits: int = 1, wait: Number | None = None) -> bool:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one attempt)."""
        ms, within, blocks = _wait_plan(wait)
        args = _core.sem_acquire_args(self.name, permits, ms)
        return _flag(args[0], await self._client._once(self.name, args, blocks, within))

    async def release(self, permits: int = 1) -> int:
        """Gives ``permits`` back; the count after the release, before
        waiters took their share."""
        args = _core.sem_release_args(self.name, permits)
        return _int(args[0], await self._client._once(self.name, args))


class AsyncPermitExpirableSemaphore(_AsyncSemaphoreBase):
    """:class:`PermitExpirableSemaphore` for asyncio:
    ``AsyncLockClient.permit_semaphore(name)``; ``async with await
    sem.acquire() as permits:``."""

    async def acquire(
        self,
        permits: int = 1,
        lease: Number | None = None,
        *,
        on_lost: _core.LostCallback | None = None,
    ) -> AsyncPermits:
        """Takes ``permits``, waiting as long as it takes."""
        guard = await self._acquire(permits, lease, 0, None, True, on_lost)
        if guard is None:
            raise ProtocolViolation("LOCK.PERMITACQUIRE ... WAIT 0 answered nil")
        return guard

    async def try_acquire(
        self,
        permits: int = 1,
        lease: Number | None = None,
        wait: Number | None = None,
        *,
        on_lost: _core.LostCallback | None = None,
    ) -> AsyncPermits | None:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one attempt)."""
        ms, within, blocks = _wait_plan(wait)
        return await self._acquire(permits, lease, ms, within, blocks, on_lost)

    async def release(self, *ids: str) -> int:
        """Releases permits by id: how many (see :meth:`PermitExpirableSemaphore.release`)."""
        args = _core.permit_release_args(self.name, [i.lower() for i in ids])
        return _int(args[0], await self._client._once(self.name, args))

    async def _acquire(
        self,
        permits: int,
        lease: Number | None,
        wait: int | None,
        within: float | None,
        blocks: bool,
        on_lost: _core.LostCallback | None,
    ) -> AsyncPermits | None:
        c = self._client
        watchdog = lease is None
        lease_s = float(c.options.watchdog_lease if lease is None else lease)
        args = _core.permit_acquire_args(self.name, permits, _core.lease_ms(lease_s), wait)
        sent = _core.monotonic()
        ids = _ids(await c._once(self.name, args, blocks, within), permits)
        if ids is None:
            return None
        try:
            expires: list[float | None] = [sent + lease_s] * len(ids)
            late = _core.monotonic() >= sent + lease_s / 3
            if late:
                asked = _core.monotonic()
                try:
                    left = _left(
                        await c._simple(self.name, ["TIME"]),
                        await c._simple(self.name, _score_args(self.name, ids)),
                    )
                    expires = [None if x is None else asked + x for x in left]
                except Exception:
                    # Unknown: the earliest end the lease can have (the grant
                    # came after ``sent``), as computed above; ``late`` has the
                    # watchdog renew at once. Not "ending now": that would call
                    # the permits lost and the guard would never give them back.
                    pass
            guard = AsyncPermits(c, self.name, ids)
            if on_lost is not None:
                guard._callbacks.append(on_lost)
            guard._entries = c._hold_permits(self.name, ids, expires, late, watchdog, _weak(guard))
            return guard
        except BaseException:
            # Cancelled (or worse) with the permits granted and no guard
            # handed out: given back in a task the cancellation cannot cut.
            c._retire_permits(self.name, ids)
            args = _core.permit_release_args(self.name, ids)
            c._release_in_background(lambda: c._once(self.name, args))
            raise


class AsyncPermits(_PermitsBase):
    """:class:`Permits` for asyncio: ``lost`` is an :class:`asyncio.Event`;
    ``await permits.release()``, or ``async with``."""

    def __init__(self, client: AsyncLockClient, name: str, ids: list[str]) -> None:
        super().__init__(name, ids)
        self._loop = asyncio.get_running_loop()
        self._client = client
        self._entries: list[_AsyncEntry] = []
        self._lost = asyncio.Event()

    def _on_lost(self, pid: str, why: LostReason) -> None:
        callbacks = self._note_lost(pid, why)
        self._lost.set()
        self._call(callbacks, why)

    def _expire_if_due(self) -> None:
        for e in self._entries:
            self._client._expire_if_due(e)

    @property
    def lost(self) -> asyncio.Event:
        """Set when a permit is lost: ``await permits.lost.wait()``."""
        self._expire_if_due()
        return self._lost

    @property
    def lost_reason(self) -> LostReason | None:
        self._expire_if_due()
        return next(iter(self._reasons.values()), None)

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: _core.LostCallback) -> None:
        why = next(iter(self._reasons.values()), None)
        if why is None:
            self._callbacks.append(callback)
        else:
            callback(why)

    async def release(self) -> None:
        """Gives the permits back (see :meth:`Permits.release`)."""
        if self._released:
            raise PermitsNotHeld(self.name, list(self.ids))
        self._released = True
        await self._give_back()

    async def _give_back(self) -> None:
        c = self._client
        pending: list[str] = []
        gone: list[str] = []
        by_id = {e.owner: e for e in self._entries}
        for e in self._entries:
            known_lost = e.state.lost is not None
            c._retire(e)
            (gone if known_lost else pending).append(e.owner)
        attempts = 0
        while pending:
            args = _core.permit_release_args(self.name, pending)
            try:
                n = _int(args[0], await c._once(self.name, args))
                if n != len(pending):
                    raise ProtocolViolation(f"{args[0]} of {len(pending)} answered {n}")
                break
            except ServerError as e:
                pid = _core.not_held_id(str(e))
                if pid is None or pid not in pending:
                    raise
                pending.remove(pid)
                gone.append(pid)
                c._mark_lost(by_id[pid], LostReason(LostReason.NOT_HELD))
            except OutcomeUnknown:
                attempts += 1
                if attempts > c.options.retries:
                    raise
                scores = await c._simple(self.name, _score_args(self.name, pending))
                pending = [p for p, s in zip(pending, scores) if s is not None]
        if gone:
            raise PermitsNotHeld(self.name, gone)

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not getattr(self, "_entries", None):
            return
        # Given back on the guard's loop, from whichever thread collects it.
        self._released = True
        try:
            self._loop.call_soon_threadsafe(self._client._release_in_background, self._give_back)
        except Exception:
            pass  # the loop is closed: the leases end on their own

    async def __aenter__(self) -> AsyncPermits:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._released:
            return
        try:
            await self.release()
        except NotHeld:
            if et is None:
                raise
