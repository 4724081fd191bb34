"""Semaphores on the redis-lock module.

* :class:`AsyncSemaphore`: Redisson's ``RSemaphore`` (``LOCK.SEM*``): a
  count of permits, taken and given back by anyone; waits are server-side,
  FIFO (a newcomer never overtakes a waiter).
* :class:`AsyncPermitExpirableSemaphore`: Redisson's
  ``RPermitExpirableSemaphore`` (``LOCK.PERMIT*``): each permit taken has an
  id and a lease; the server takes it back when the lease ends. Taken
  without a lease, the client's watchdog renews it (``LOCK.PERMITRENEW``)
  and the :class:`AsyncPermits` guard's ``lost`` is set if the server no
  longer has it (told by tracking within milliseconds, or by the renewal).

Commands that change a count are never resent once they may have run: a
connection that fails after sending one raises :class:`OutcomeUnknown`.
"""

from __future__ import annotations

from functools import partial
from types import TracebackType
from typing import Any

from .. import _protocol
from .._api import CountsApi, SemaphoreApi
from .._holds import Entry, LostCallback, PermitsView, monotonic
from .._protocol import PERMIT, LostReason, Number
from ..errors import NotHeld, OutcomeUnknown, PermitsNotHeld, ProtocolViolation, ServerError
from . import _io
from ._io import Event, Later
from .engine import Engine

Info = dict[str, Any]


class AsyncSemaphore(SemaphoreApi[Later[bool], Later[int], Later[Info | None], Later[None]]):
    """Redisson's ``RSemaphore``: ``locks.semaphore(name)``; its calls are
    ``SemaphoreApi``'s."""


class AsyncPermitExpirableSemaphore(CountsApi[Later[bool], Later[int], Later[Info | None]]):
    """Redisson's ``RPermitExpirableSemaphore``:
    ``locks.permit_semaphore(name)``; ``async with await sem.acquire() as
    permits:``. With ``lease`` s the server takes the permits back at its
    end (no watchdog; ``lost`` is set then)."""

    async def acquire(
        self, permits: int = 1, lease: Number | None = None, *, on_lost: LostCallback | None = None
    ) -> AsyncPermits:
        """Takes ``permits``, waiting as long as it takes (server-side FIFO,
        on a connection of its own)."""
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
        on_lost: LostCallback | None = None,
    ) -> AsyncPermits | None:
        """Takes ``permits`` if free within ``wait`` s (None or 0: one
        attempt). None when not."""
        ms, within = _protocol.wait_plan(wait)
        return await self._acquire(permits, lease, ms, within, ms is not None, on_lost)

    async def release(self, *ids: str) -> int:
        """Releases permits by id (taken by anyone): how many.
        :class:`ServerError` naming an id not held, and nothing released."""
        args = _protocol.permit_release_args(self.name, [i.lower() for i in ids])
        return await self._call(args, partial(_protocol.integer, args[0]), once=True)  # type: ignore[no-any-return]

    async def _acquire(
        self,
        permits: int,
        lease: Number | None,
        wait: int | None,
        within: float | None,
        blocks: bool,
        on_lost: LostCallback | None,
    ) -> AsyncPermits | None:
        engine = self._engine
        lease_s = float(engine.options.watchdog_lease if lease is None else lease)
        args = _protocol.permit_acquire_args(self.name, permits, _protocol.lease_ms(lease_s), wait)
        sent = monotonic()
        reply = await self._engine.counted.simple(self.name, args, within, once=True, blocks=blocks)
        ids = _protocol.permit_ids(reply, permits)
        if ids is None:
            return None
        entries: list[Entry] = []
        try:
            expires: list[float | None] = [sent + lease_s] * len(ids)
            late = monotonic() >= sent + lease_s / 3
            if late:
                # The lease ran from a grant somewhere in a long wait: measured.
                expires = await self._measure(ids, expires)
            guard = AsyncPermits(engine, self.name, ids, on_lost)
            handler = guard._handler()
            for pid, end in zip(ids, expires):
                entry = engine.registry.entry(self.name, pid, PERMIT)
                entries.append(entry)
                engine.hold(entry, end or monotonic(), late, lease is None, handler(pid))
                if end is None:
                    engine.registry.mark_lost(entry, LostReason(LostReason.NOT_HELD))
            guard._entries = entries
            return guard
        except BaseException:
            # Interrupted with the permits granted and no guard handed out:
            # given back (in a task the cancellation cannot cut short).
            for entry in entries:
                engine.registry.retire(entry)
            _io.after_interruption(self._give_back, _protocol.permit_release_args(self.name, ids))
            raise

    async def _measure(self, ids: list[str], guess: list[float | None]) -> list[float | None]:
        """The permits' ends from the server's ``TIME`` and their deadlines;
        ``guess`` (the earliest end the lease can have: the grant came after
        the request) when that fails. Not "ending now": that would call the
        permits lost and the guard would never give them back."""
        counted = self._engine.counted
        asked = monotonic()
        try:
            now = await counted.simple(self.name, ["TIME"])
            scores = await counted.simple(self.name, _protocol.score_args(self.name, ids))
        except Exception:
            return guess
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        return [None if s is None else asked + max(0.0, float(s) - now_ms) / 1000 for s in scores]

    async def _give_back(self, args: list[Any]) -> None:
        try:
            await self._engine.counted.simple(self.name, args, once=True)
        except Exception:
            pass  # the leases end them


class AsyncPermits(PermitsView):
    """Leased permits of an :class:`AsyncPermitExpirableSemaphore`:
    :meth:`release` gives them back (also on leaving an ``async with``
    block). ``lost`` is an Event set when the client learns that one of
    them is gone (taken away on the server, renewals failing for a whole
    lease, a caller-given lease ending, a release that found it gone)."""

    def __init__(
        self, engine: Engine, name: str, ids: list[str], on_lost: LostCallback | None
    ) -> None:
        super().__init__(engine.registry, name, ids, on_lost, Event())
        self._engine = engine
        self._home = _io.home()

    @property
    def lost(self) -> Event:
        """Set when a permit is lost: wait on it, or poll ``lost.is_set()``."""
        self._expire_if_due()
        event: Event = self._lost
        return event

    async def release(self) -> None:
        """Gives the permits back (``LOCK.PERMITRELEASE``); those still held
        are released even when some are gone, then :class:`PermitsNotHeld`
        names the gone ones."""
        if self._released:
            raise PermitsNotHeld(self.name, list(self.ids))
        self._released = True
        engine = self._engine
        pending, gone, by_id = self._take_for_release()
        attempts = 0
        while pending:
            args = _protocol.permit_release_args(self.name, pending)
            try:
                n = _protocol.integer(
                    args[0], await engine.counted.simple(self.name, args, once=True)
                )
                if n != len(pending):
                    raise ProtocolViolation(f"{args[0]} of {len(pending)} answered {n}")
                break
            except ServerError as e:
                pid = _protocol.not_held_id(str(e))
                if pid is None or pid not in pending:
                    raise
                pending.remove(pid)
                gone.append(pid)
                engine.registry.mark_lost(by_id[pid], LostReason(LostReason.NOT_HELD))
            except OutcomeUnknown:
                attempts += 1
                if attempts > engine.options.retries:
                    raise
                # Those still in the set were not released: only they go again.
                scores = await engine.counted.simple(
                    self.name, _protocol.score_args(self.name, pending)
                )
                pending = [p for p, s in zip(pending, scores) if s is not None]
        if gone:
            raise PermitsNotHeld(self.name, gone)

    async def _release_quietly(self) -> None:
        try:
            await self.release()
        except Exception:
            pass  # lost already, or unreachable: the leases end on their own

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not getattr(self, "_entries", None):
            return
        _io.when_dropped(self._home, self._release_quietly)

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
