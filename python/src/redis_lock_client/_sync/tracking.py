"""Generated from ``_async/tracking.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import ARM_DELAY, Entry, Registry, Watchlist, monotonic
from .._protocol import Options
from . import _io

MAX_BACKOFF = 0.02
CHANNEL = "__redis__:invalidate"


class Tracker(Watchlist):
    def __init__(self, redis: Any, registry: Registry, options: Options) -> None:
        super().__init__(options.track_locks and not _protocol.is_cluster(redis), _io, registry)
        self.redis = redis
        self.timeout = options.command_timeout
        self.subscriber: Any = None
        self.reading = _io.Lock()  # one command at a time on the reader

    def connect(self) -> None:
        sub, reader = _io.new_connection(self.redis, protocol=2), _io.new_connection(self.redis)
        try:
            sub.connect()
            sub_id = _io.execute(sub, ["CLIENT", "ID"], self.timeout)
            sub.send_command("SUBSCRIBE", CHANNEL)
            _io.reply(sub, _protocol.short_timeout(self.timeout))
            reader.connect()
            on = ["CLIENT", "TRACKING", "ON", "REDIRECT", sub_id]
            _io.execute(reader, on, self.timeout)
        except BaseException:
            for conn in (sub, reader):
                _io.close(conn)
            raise
        self.reading = _io.Lock()
        self.subscriber, self.reader = sub, reader

    def disconnect(self) -> None:
        sub, reader = self.subscriber, self.reader
        self.subscriber = self.reader = None
        for conn in (sub, reader):
            if conn is not None:
                _io.close(conn)

    def listen(self) -> None:
        try:
            backoff = ARM_DELAY
            while True:
                if self.subscriber is None:
                    try:
                        self.connect()
                        backoff = ARM_DELAY
                        self.check_all(self.all())
                    except rex.ResponseError:
                        self.refused()
                        return
                    except Exception:
                        self.disconnect()
                        _io.sleep(backoff)
                        backoff = min(backoff * 2, MAX_BACKOFF)
                        continue
                try:
                    msg = _io.message(self.subscriber, 1.0)
                except Exception:
                    self.disconnect()
                    continue
                if msg is not None:
                    self.check_all(self.named(msg))
                elif self.idle(monotonic()):
                    break
        except BaseException as e:  # its event loop closed: the next arm starts another
            if not isinstance(e, GeneratorExit):  # (a coroutine closed cannot wait)
                self.disconnect()
            self.stopped()
            raise
        self.disconnect()  # after idle() gave up the slot: not under the except

    def check_all(self, entries: list[Entry]) -> None:
        for entry in entries:
            if not entry.is_held():
                continue
            if _io.try_hold(entry.op):
                try:
                    self.check(entry)
                finally:
                    entry.op.release()
            else:
                _io.spawn(self.check_when_free, entry)

    def check_when_free(self, entry: Entry) -> None:
        with entry.op:
            self.check(entry)

    def check(self, entry: Entry) -> None:
        reader = self.reader
        if reader is None or not entry.is_held():
            return
        _, read = _protocol.tracking_read(entry.kind, entry.name, entry.field)
        try:
            with self.reading:
                reply = _io.execute(reader, read, self.timeout)
        except Exception:
            _io.close(reader)  # the listener hears of it and reconnects
            return
        if not _protocol.still_held(entry.kind, reply):
            self.registry.gone(entry)
