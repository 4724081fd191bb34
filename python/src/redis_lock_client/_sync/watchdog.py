"""Generated from ``_async/watchdog.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from .. import _protocol
from .._holds import Entry, Registry, Schedule, monotonic
from ..errors import describe
from . import _io
from .counted import Counted
from .tracking import Tracker


class Watchdog(Schedule):
    def __init__(self, counted: Counted, registry: Registry, tracker: Tracker) -> None:
        super().__init__(registry, tracker, _io)
        self.counted = counted

    def run(self) -> None:
        try:
            while (until := self.round(monotonic())) is not None:
                self.wakeup.wait(until - monotonic())
        except BaseException:  # a client used by one asyncio.run after another
            self.stopped()
            raise

    def renew(self, entry: Entry, lease: float) -> None:
        sent = monotonic()
        result: bool | None = None
        error = ""
        left = max(entry.expires - sent, _protocol.retry_after(lease))
        bound = min(_protocol.short_timeout(self.counted.options.command_timeout), left)
        try:
            args = [entry.kind.renew, entry.name, entry.owner, _protocol.lease_ms(lease)]
            reply = self.counted.simple(entry.name, args, timeout=bound, retries=0)
            result = _protocol.flag(entry.kind.renew, reply)
        except Exception as e:  # a renewal must never kill the watchdog
            error = describe(e)
        self.registry.renewed(entry, sent, lease, result, error)
        self.due(monotonic())
