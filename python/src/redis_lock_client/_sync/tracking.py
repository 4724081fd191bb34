"""Generated from ``_async/tracking.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

from __future__ import annotations

import threading
from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import Entry, Registry, Watchlist, monotonic
from .._protocol import Options
from . import _io

ARM_DELAY = 0.01
MAX_BACKOFF = 0.02
IDLE = 10.0
CHANNEL = "__redis__:invalidate"


class Tracker:
    def __init__(self, redis: Any, registry: Registry, options: Options) -> None:
        self.redis = redis
        self.registry = registry
        self.timeout = options.command_timeout
        self.enabled = options.track_locks and not _io.is_cluster(redis)
        self.watchlist = Watchlist()
        self.subscriber: Any = None
        self.reader: Any = None
        self.reading = _io.Lock()  # one command at a time on the reader
        self.listener: Any = None
        self.mutex = threading.Lock()

    def watch(self, entry: Entry) -> float | None:
        if not self.enabled:
            return None
        at = monotonic() + ARM_DELAY
        self.watchlist.add(entry, at)
        return at

    def arm_due(self, now: float) -> float:
        ready, later = self.watchlist.due(now)
        if ready:
            with self.mutex:
                if self.listener is None and self.enabled:
                    self.listener = _io.spawn(self.listen)
            if self.reader is not None:
                _io.spawn(self.check_all, ready)
        return later

    def connect(self) -> None:
        sub = _io.new_connection(self.redis, protocol=2)
        try:
            _io.connect(sub)
            sub_id = _io.execute(sub, ["CLIENT", "ID"], self.timeout)
            _io.send(sub, ["SUBSCRIBE", CHANNEL])
            _io.reply(sub, _protocol.short_timeout(self.timeout))
            reader = _io.new_connection(self.redis)
            try:
                _io.connect(reader)
                on = ["CLIENT", "TRACKING", "ON", "REDIRECT", sub_id]
                _io.execute(reader, on, self.timeout)
            except BaseException:
                _io.close(reader)
                raise
        except BaseException:
            _io.close(sub)
            raise
        self.subscriber, self.reader = sub, reader

    def disconnect(self) -> None:
        sub, reader = self.subscriber, self.reader
        self.subscriber = self.reader = None
        for conn in (sub, reader):
            if conn is not None:
                _io.close(conn)

    def listen(self) -> None:
        backoff = ARM_DELAY
        idle_since: float | None = None
        while True:
            if self.subscriber is None:
                try:
                    self.connect()
                    backoff = ARM_DELAY
                    self.check_all(self.watchlist.all())
                except rex.ResponseError:
                    self.enabled = False
                    self.watchlist.clear()
                    with self.mutex:
                        self.listener = None
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
            if msg is None:
                if self.watchlist.prune():
                    idle_since = None
                    continue
                now = monotonic()
                idle_since = now if idle_since is None else idle_since
                with self.mutex:
                    if now - idle_since >= IDLE and not self.watchlist.prune():
                        self.listener = None
                        break
                continue
            self.check_all(self.watchlist.named(msg))
        self.disconnect()

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
