"""The watchdog: one task (thread, in the threaded client) per client
renews every hold taken without a caller-given lease every third of the
lease, tells holders when a lease passed without a renewal, and arms the
tracking of new holds. It runs while the client holds something (and
``IDLE`` s more, so a client locking in a loop does not start one per lock).

A renewal answered 0 marks the hold lost at once; a failed one is retried
every tenth of the lease, and the hold is lost once the lease has passed
since the last good renewal was sent. Each renewal runs on its own, so one
stuck on a frozen server never delays the verdicts. A renewal racing with
the final release proves nothing (Redisson #7272): its result is ignored.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from .. import _protocol
from .._holds import Entry, Registry, monotonic
from ..errors import ProtocolViolation, describe
from . import _io
from .counted import Counted
from .tracking import Tracker

# How long the watchdog stays with nothing to watch before it ends (s).
IDLE = 10.0


class Watchdog:
    def __init__(self, counted: Counted, registry: Registry, tracker: Tracker) -> None:
        self.counted = counted
        self.registry = registry
        self.tracker = tracker
        self.mutex = threading.Lock()
        # When its sleep ends; inf while awake (it plans before sleeping).
        self.wake_at = math.inf
        self.wakeup = _io.Wakeup()
        self.runner: Any = None

    def due(self, at: float) -> None:
        """Makes sure the watchdog runs and looks again by ``at``."""
        with self.mutex:
            if self.runner is None:
                self.runner = _io.spawn(self.run)
            if at >= self.wake_at:
                return
            self.wake_at = at
        self.wakeup.set()

    async def run(self) -> None:
        idle_since: float | None = None
        while True:
            now = monotonic()
            renewals, next_at = self.registry.plan(now)
            for entry, lease in renewals:
                _io.spawn(self.renew, entry, lease)
            next_at = min(next_at, self.tracker.arm_due(now))
            with self.mutex:
                if next_at == math.inf:
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since >= IDLE:
                        self.runner = None
                        return
                    next_at = idle_since + IDLE
                else:
                    idle_since = None
                until = min(next_at, self.wake_at)
                self.wake_at = until
            await self.wakeup.wait(until - monotonic())
            with self.mutex:
                self.wake_at = math.inf

    async def renew(self, entry: Entry, lease: float) -> None:
        """One renewal, its result recorded (``Registry.renewed``)."""
        sent = monotonic()
        result: bool | None = None
        error = ""
        o = self.counted.options
        try:
            reply = await self.counted.simple(
                entry.name,
                [entry.kind.renew, entry.name, entry.owner, _protocol.lease_ms(lease)],
                timeout=min(_protocol.short_timeout(o.command_timeout), lease / 3),
                retries=0,
            )
            if reply not in (0, 1):
                raise ProtocolViolation(f"{entry.kind.renew} answered {reply!r}")
            result = reply == 1
        except Exception as e:  # a renewal must never kill the watchdog
            error = describe(e)
        self.registry.renewed(entry, sent, lease, result, error)
        self.due(monotonic())
