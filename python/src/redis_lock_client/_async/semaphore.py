"""The semaphores (Redisson's ``RSemaphore``, ``RPermitExpirableSemaphore``).
Their calls are ``_api``'s, written once for both clients, but for taking
leased permits and giving them back. Commands that change a count are
never resent once they may have run: a connection that fails after
sending one raises :class:`OutcomeUnknown`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .. import _protocol
from .._api import PermitSemaphoreApi, PermitsView, SemaphoreApi
from .._holds import LostCallback, monotonic
from .._protocol import LostReason, Number, is_some, same
from ..errors import OutcomeUnknown, PermitsNotHeld, ProtocolViolation, ServerError
from . import _io
from ._io import Event, Later
from .guard import Releasing

Info = dict[str, Any]


class AsyncSemaphore(SemaphoreApi[Later[bool], Later[int], Later[Info | None], Later[None]]): ...


class AsyncPermits(PermitsView[Event], Releasing):
    async def release(self) -> None:
        """Gives the permits back (``LOCK.PERMITRELEASE``); those still held
        are released even when some are gone, then :class:`PermitsNotHeld`
        names the gone ones."""
        engine = self._engine
        pending, gone, by_id = self._take_for_release()
        attempts = 0
        while pending:
            args = _protocol.permit_release_args(self.name, pending)
            try:
                n = await engine.counted.simple(self.name, args, once=True)
                if _protocol.integer(args[0], n) != len(pending):
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

    _give_back = release


class AsyncPermitExpirableSemaphore(
    PermitSemaphoreApi[
        Later[bool], Later[int], Later[Info | None], Later[AsyncPermits], Later[AsyncPermits | None]
    ]
):
    async def _acquire(
        self,
        permits: int,
        lease: Number | None,
        wait: int | None,
        within: float | None,
        on_lost: LostCallback | None,
    ) -> AsyncPermits | None:
        engine = self._engine
        lease_s = float(engine.options.watchdog_lease if lease is None else lease)
        ms = _protocol.lease_ms(lease_s)
        make = partial(_protocol.permit_acquire_args, self.name, permits, ms)
        sent = monotonic()
        if wait is None:
            reply = await engine.counted.simple(self.name, make(None), once=True)
        else:
            reply = await self._wait(make, is_some, within, list, self._give_back_ids, same)
        ids = _protocol.permit_ids(reply, permits)
        if ids is None:
            if wait == 0:
                raise ProtocolViolation("LOCK.PERMITACQUIRE ... WAIT 0 answered nil")
            return None
        try:
            late = monotonic() >= sent + lease_s / 3
            ends: list[float | None] = [sent + lease_s] * len(ids)
            if late:  # the lease ran from a grant somewhere in a long wait: measured
                ends = await self._measure(ids, sent + lease_s)
            return AsyncPermits(engine, self.name, ids, on_lost, ends, late, lease is None)
        except BaseException:
            # Interrupted with the permits granted and no guard handed out:
            # given back (in a task the cancellation cannot cut short).
            _io.after_interruption(engine.quietly, self._give_back_ids, ids)
            raise

    async def _give_back_ids(self, ids: list[Any]) -> None:
        args = _protocol.permit_release_args(self.name, [str(_protocol.text(i)) for i in ids])
        await self._engine.counted.simple(self.name, args, once=True)

    async def _measure(self, ids: list[str], earliest: float) -> list[float | None]:
        """The permits' ends from the server's ``TIME`` and their deadlines;
        ``earliest`` (the earliest end the lease can have: the grant came
        after the request) when that fails. Not "ending now": that would
        call the permits lost and the guard would never give them back."""
        counted = self._engine.counted
        asked = monotonic()
        try:
            now = await counted.simple(self.name, ["TIME"])
            scores = await counted.simple(self.name, _protocol.score_args(self.name, ids))
        except Exception:
            return [earliest] * len(ids)
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        return [None if s is None else asked + max(0.0, float(s) - now_ms) / 1000 for s in scores]
