"""The watchdog: one task (thread, in the threaded client) per client
renews every hold taken without a caller-given lease every third of the
lease, tells holders when a lease passed without a renewal, and arms the
tracking of new holds. It runs while the client holds something (and a
while longer: ``_holds.Schedule``, its schedule, written once).

A renewal answered 0 marks the hold lost at once; a failed one is retried
every tenth of the lease, and the hold is lost once the lease has passed
since the last good renewal was sent. Each renewal runs on its own, so one
stuck on a frozen server never delays the verdicts. A renewal racing with
the final release proves nothing (Redisson #7272): its result is ignored.
"""

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

    async def run(self) -> None:
        try:
            while (until := self.round(monotonic())) is not None:
                await self.wakeup.wait(until - monotonic())
        except BaseException:  # a client used by one asyncio.run after another
            self.stopped()
            raise

    async def renew(self, entry: Entry, lease: float) -> None:
        """One renewal, its result recorded (``Registry.renewed``)."""
        sent = monotonic()
        result: bool | None = None
        error = ""
        # A reply any time before the lease ends keeps the hold: on a
        # loaded machine, cutting it sooner throws a renewal away.
        left = max(entry.expires - sent, _protocol.retry_after(lease))
        bound = min(_protocol.short_timeout(self.counted.options.command_timeout), left)
        try:
            args = [entry.kind.renew, entry.name, entry.owner, _protocol.lease_ms(lease)]
            reply = await self.counted.simple(entry.name, args, timeout=bound, retries=0)
            result = _protocol.flag(entry.kind.renew, reply)
        except Exception as e:  # a renewal must never kill the watchdog
            error = describe(e)
        self.registry.renewed(entry, sent, lease, result, error)
        self.due(monotonic())
