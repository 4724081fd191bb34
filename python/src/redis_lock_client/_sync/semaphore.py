"""Generated from ``_async/semaphore.py`` by ``scripts/unasync.py``: do not edit."""

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


class Semaphore(SemaphoreApi[Later[bool], Later[int], Later[Info | None], Later[None]]): ...


class Permits(PermitsView[Event], Releasing):
    def release(self) -> None:
        """Gives the permits back (``LOCK.PERMITRELEASE``); those still held
        are released even when some are gone, then :class:`PermitsNotHeld`
        names the gone ones."""
        engine = self._engine
        pending, gone, by_id = self._take_for_release()
        attempts = 0
        while pending:
            args = _protocol.permit_release_args(self.name, pending)
            try:
                n = engine.counted.simple(self.name, args, once=True)
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
                scores = engine.counted.simple(self.name, _protocol.score_args(self.name, pending))
                pending = [p for p, s in zip(pending, scores) if s is not None]
        if gone:
            raise PermitsNotHeld(self.name, gone)

    _give_back = release


class PermitExpirableSemaphore(
    PermitSemaphoreApi[
        Later[bool], Later[int], Later[Info | None], Later[Permits], Later[Permits | None]
    ]
):
    def _acquire(
        self,
        permits: int,
        lease: Number | None,
        wait: int | None,
        within: float | None,
        on_lost: LostCallback | None,
    ) -> Permits | None:
        engine = self._engine
        lease_s = float(engine.options.watchdog_lease if lease is None else lease)
        ms = _protocol.lease_ms(lease_s)
        make = partial(_protocol.permit_acquire_args, self.name, permits, ms)
        sent = monotonic()
        if wait is None:
            reply = engine.counted.simple(self.name, make(None), once=True)
        else:
            reply = self._wait(make, is_some, within, list, self._give_back_ids, same)
        ids = _protocol.permit_ids(reply, permits)
        if ids is None:
            if wait == 0:
                raise ProtocolViolation("LOCK.PERMITACQUIRE ... WAIT 0 answered nil")
            return None
        try:
            late = monotonic() >= sent + lease_s / 3
            ends: list[float | None] = [sent + lease_s] * len(ids)
            if late:  # the lease ran from a grant somewhere in a long wait: measured
                ends = self._measure(ids, sent + lease_s)
            return Permits(engine, self.name, ids, on_lost, ends, late, lease is None)
        except BaseException:
            _io.after_interruption(engine.quietly, self._give_back_ids, ids)
            raise

    def _give_back_ids(self, ids: list[Any]) -> None:
        args = _protocol.permit_release_args(self.name, [str(_protocol.text(i)) for i in ids])
        self._engine.counted.simple(self.name, args, once=True)

    def _measure(self, ids: list[str], earliest: float) -> list[float | None]:
        counted = self._engine.counted
        asked = monotonic()
        try:
            now = counted.simple(self.name, ["TIME"])
            scores = counted.simple(self.name, _protocol.score_args(self.name, ids))
        except Exception:
            return [earliest] * len(ids)
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        return [None if s is None else asked + max(0.0, float(s) - now_ms) / 1000 for s in scores]
