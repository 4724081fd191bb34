"""What a client and its owner views share: the connection and retry rules
(``counted.py``), the registry of holds (``_holds.py``), the tracking pair
and the watchdog; and the changes of a hold that every kind of object
makes alike: recording a grant, giving a hold back, restarting a lease."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from .. import _protocol
from .._holds import Entry, LostCallback, Registry, monotonic
from .._protocol import Options
from ..errors import HoldCountMismatch
from . import _io
from .counted import Counted
from .tracking import Tracker
from .watchdog import Watchdog


class Engine:
    io = _io  # the flavour's primitives, for the objects' shared parts (``_api``)

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
        """Records a grant ending at ``expires`` (``Registry.grant``): the
        watchdog keeps it when ``watchdog``, or ends it with its lease, and
        tracking watches it."""
        lease = self.options.watchdog_lease if watchdog else None
        track = self.tracker.enabled
        self.watchdog.due(self.registry.grant(entry, expires, renew_now, lease, on_lost, track))

    async def release(self, entry: Entry) -> None:
        """Gives one hold back: :class:`NotHeld` if it was lost."""
        async with entry.op:
            await self.release_locked(entry)

    async def release_locked(self, entry: Entry) -> None:
        """:meth:`release`, with ``entry.op`` held."""
        known, args = self.registry.releasing(entry)
        try:
            seen, reply = await self.counted.counted(entry, args, known, known - 1)
        except HoldCountMismatch as e:
            if e.found != 0:
                raise
            seen, reply = True, None
        self.registry.released(entry, seen, reply, args[0])

    async def quietly(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> None:
        """A clean-up nobody waits for (a guard dropped unreleased, an
        interrupted call's): failures are ignored (lost already, or
        unreachable: the lease ends on its own)."""
        with contextlib.suppress(Exception):
            await fn(*args, **kw)

    async def restart(self, entry: Entry, lease: float) -> bool:
        """Restarts the hold's lease at ``lease`` s; False if not held."""
        sent = monotonic()
        args = [entry.kind.renew, entry.name, entry.owner, _protocol.lease_ms(lease)]
        if await self.counted.simple(entry.name, args) != 1:
            return False
        self.registry.restarted(entry, sent, lease)
        self.watchdog.due(sent + lease)  # a shorter lease ends sooner: told then
        return True
