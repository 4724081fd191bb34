"""The fast lost signal: the server tells the client the moment the key of
a hold changes (``CLIENT TRACKING``), on one pair of connections per
client, so a forced, deleted or expired lock or permit is told within
milliseconds instead of at the next renewal.

The pair, in RESP2 (any redis-py, any parser): a subscriber to
``__redis__:invalidate``, and a reader whose tracking is redirected to it.
Every hold still held ``ARM_DELAY`` after its grant (a lock released at
once costs nothing) is read once on the reader (``HGET name field``, or
``ZSCORE {name}:timeout id`` for a permit), which makes the server remember
the key for it. When the key changes in any way (``LOCK.FORCE``, ``DEL``,
an expiry, and also this client's own renewals and releases) the server
sends an invalidation naming it, once; the listener reads the key again,
which both re-arms the notification and answers the question: gone means
lost. Each check holds the entry's ``op``, as acquisitions and releases do,
so it never judges a hold mid-change.

Renewals stay the fallback: in a cluster, with ``track_locks=False``, when
ACLs deny ``CLIENT TRACKING`` (final: not asked again), or while the pair
is down. After it comes back (a failover, through Sentinel, lands on the
new master) every watched hold is checked again, so a loss in the gap is
told then.
"""

from __future__ import annotations

from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import ARM_DELAY, Entry, Registry, Watchlist, monotonic
from .._protocol import Options
from . import _io

# The longest pause between attempts to connect the pair again.
MAX_BACKOFF = 0.02
CHANNEL = "__redis__:invalidate"


class Tracker(Watchlist):
    """One client's tracking pair; what it watches is ``Watchlist``'s."""

    def __init__(self, redis: Any, registry: Registry, options: Options) -> None:
        super().__init__(options.track_locks and not _protocol.is_cluster(redis), _io, registry)
        self.redis = redis
        self.timeout = options.command_timeout
        self.subscriber: Any = None
        self.reading = _io.Lock()  # one command at a time on the reader

    async def connect(self) -> None:
        """The pair: the subscriber (RESP2, so invalidations come as
        messages), then the reader, redirected to it."""
        sub, reader = _io.new_connection(self.redis, protocol=2), _io.new_connection(self.redis)
        try:
            await sub.connect()
            sub_id = await _io.execute(sub, ["CLIENT", "ID"], self.timeout)
            await sub.send_command("SUBSCRIBE", CHANNEL)
            await _io.reply(sub, _protocol.short_timeout(self.timeout))
            await reader.connect()
            on = ["CLIENT", "TRACKING", "ON", "REDIRECT", sub_id]
            await _io.execute(reader, on, self.timeout)
        except BaseException:
            for conn in (sub, reader):
                await _io.close(conn)
            raise
        # A new lock (not one bound to an event loop gone) before the reader
        # it guards: a check that sees the new reader also sees its lock.
        self.reading = _io.Lock()
        self.subscriber, self.reader = sub, reader

    async def disconnect(self) -> None:
        sub, reader = self.subscriber, self.reader
        self.subscriber = self.reader = None
        for conn in (sub, reader):
            if conn is not None:
                await _io.close(conn)

    async def listen(self) -> None:
        """Connects the pair, then checks what each invalidation names;
        ends once nothing was watched for a while or tracking is refused."""
        try:
            backoff = ARM_DELAY
            while True:
                if self.subscriber is None:
                    try:
                        await self.connect()
                        backoff = ARM_DELAY
                        # Arm (and check) everything: a change in the gap was not told.
                        await self.check_all(self.all())
                    except rex.ResponseError:
                        self.refused()
                        return
                    except Exception:
                        await self.disconnect()
                        await _io.sleep(backoff)
                        backoff = min(backoff * 2, MAX_BACKOFF)
                        continue
                try:
                    msg = await _io.message(self.subscriber, 1.0)
                except Exception:
                    await self.disconnect()
                    continue
                if msg is not None:
                    await self.check_all(self.named(msg))
                elif self.idle(monotonic()):
                    break
        except BaseException as e:  # its event loop closed: the next arm starts another
            if not isinstance(e, GeneratorExit):  # (a coroutine closed cannot wait)
                await self.disconnect()
            self.stopped()
            raise
        await self.disconnect()  # after idle() gave up the slot: not under the except

    async def check_all(self, entries: list[Entry]) -> None:
        for entry in entries:
            if not entry.is_held():
                continue
            if await _io.try_hold(entry.op):
                try:
                    await self.check(entry)
                finally:
                    entry.op.release()
            else:
                # An acquisition or release of it is under way (maybe a long
                # wait): checked once it is done, without holding up the rest.
                _io.spawn(self.check_when_free, entry)

    async def check_when_free(self, entry: Entry) -> None:
        async with entry.op:
            await self.check(entry)

    async def check(self, entry: Entry) -> None:
        """Reads the hold on the reader (re-arming the notification); marks
        it lost when gone. Failures are left to the listener (a broken pair
        is connected again and everything checked) and to the renewals."""
        reader = self.reader
        if reader is None or not entry.is_held():
            return
        _, read = _protocol.tracking_read(entry.kind, entry.name, entry.field)
        try:
            async with self.reading:
                reply = await _io.execute(reader, read, self.timeout)
        except Exception:
            await _io.close(reader)  # the listener hears of it and reconnects
            return
        if not _protocol.still_held(entry.kind, reply):
            self.registry.gone(entry)
