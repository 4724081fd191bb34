"""Generated from ``_async/engine.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from .. import _protocol
from .._holds import Entry, LostCallback, Registry, monotonic
from .._protocol import Options
from ..errors import HoldCountMismatch, NotHeld, ProtocolViolation
from . import _io
from .counted import Counted
from .tracking import Tracker
from .watchdog import Watchdog


class Engine:
    def __init__(self, redis: Any, options: Options) -> None:
        self.id = _protocol.new_client_id()
        self.options = options
        self.counted = Counted(redis, options)
        self.registry = Registry(_io.Lock, _io.Event)
        self.tracker = Tracker(redis, self.registry, options)
        self.watchdog = Watchdog(self.counted, self.registry, self.tracker)

    def hold(
        self,
        entry: Entry,
        expires: float,
        renew_now: bool,
        watchdog: bool,
        on_lost: LostCallback | None,
    ) -> None:
        lease = self.options.watchdog_lease if watchdog else None
        due = self.registry.grant(entry, expires, renew_now, lease, on_lost)
        armed = self.tracker.watch(entry)
        self.watchdog.due(due if armed is None else min(due, armed))

    def release(self, entry: Entry) -> None:
        with entry.op:
            self.release_locked(entry)

    def release_locked(self, entry: Entry) -> None:
        with entry.mutex:
            known, renew, lost = entry.holds, entry.watchdog, entry.retired
            if known and lost:
                entry.holds -= 1
        if known == 0 or lost:
            raise NotHeld(entry.name)
        args = _protocol.release_args(entry.kind, entry.name, entry.owner, known, renew)
        try:
            seen, reply = self.counted.counted(
                entry.name,
                entry.owner,
                entry.field,
                args,
                known,
                known - 1,
                self.options.command_timeout,
            )
        except HoldCountMismatch as e:
            if e.found != 0:
                raise
            seen, reply = True, None
        if seen and reply not in (None, 0, 1):
            raise ProtocolViolation(f"{args[0]} answered {reply!r}")
        held = not seen or reply is not None
        self.registry.released(entry, held)
        if not held:
            raise NotHeld(entry.name)

    def release_quietly(self, entry: Entry) -> None:
        try:
            self.release(entry)
        except Exception:
            pass

    def restart(self, entry: Entry, lease: float) -> bool:
        sent = monotonic()
        args = [entry.kind.renew, entry.name, entry.owner, _protocol.lease_ms(lease)]
        if self.counted.simple(entry.name, args) != 1:
            return False
        self.registry.restarted(entry, sent, lease)
        return True
