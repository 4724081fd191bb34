"""Generated from ``_async/acquire.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _protocol
from .._holds import Entry, LostCallback, Progress, monotonic
from .._protocol import LOCK, Kind, LostReason, Number
from ..errors import LockError, ProtocolViolation
from . import _io
from .engine import Engine


def acquire(
    engine: Engine,
    name: str,
    whose: Callable[[], str],
    lease: Number | None,
    wait: float | None,
    fenced: bool,
    on_lost: LostCallback | None,
    make_guard: Callable[[Engine, Entry, int | None], Any],
    kind: Kind = LOCK,
) -> Any:
    owner, o = whose(), engine.options
    lease_s = float(o.watchdog_lease if lease is None else lease)
    ms = _protocol.lease_ms(lease_s)
    deadline = monotonic() + wait if wait and wait > 0 else None
    sync = o.sync_args() if kind.syncable else None
    within = o.acquire_timeout() if kind.syncable else o.command_timeout
    once = _protocol.acquire_args(name, owner, ms, None, fenced, sync, kind)
    while True:
        entry = engine.registry.entry(name, owner, kind)
        progress = Progress()
        try:
            with entry.op:
                if entry.retired:
                    continue
                known = progress.known = entry.holds
                counted = engine.counted.counted
                seen, reply = counted(entry, once, known, known + 1, within, progress)
                got, token = _protocol.parse_acquire(reply, fenced) if seen else (True, None)
                if not got and (wait is None or wait > 0):
                    margin = o.wait_margin + (o.sync_time() if sync is not None else 0.0)

                    def ask(wait_ms: int) -> list[Any]:
                        return _protocol.acquire_args(name, owner, ms, wait_ms, fenced, sync, kind)

                    seen, reply = counted(entry, ask, known, known + 1, margin, progress, deadline)
                    got, token = _protocol.parse_acquire(reply, fenced) if seen else (True, None)
                    if progress.wait is not None and progress.wait.crossed:
                        args = _protocol.release_args(kind, name, owner, known + 2, lease_s)
                        counted(entry, args, known + 2, known + 1, within)
                if not got:
                    engine.registry.retire_if_empty(entry)
                    if wait is None:
                        raise ProtocolViolation(f"{kind.acquire} ... WAIT 0 answered {reply!r}")
                    return None
                if fenced and not seen:
                    v = engine.counted.simple(name, ["GET", _protocol.token_key(name)])
                    token = None if v is None else int(v)
                expires, renew_now, gone = progress.sent_at + lease_s, False, False
                if monotonic() >= progress.sent_at + lease_s / 3:
                    expires, renew_now, gone = measured_expiry(engine, entry, lease_s)
                guard = make_guard(engine, entry, token)
                guard.release_on_drop = False
                progress.guard = guard
                engine.hold(entry, expires, renew_now, lease is None, on_lost)
                if gone:
                    engine.registry.mark_lost(entry, LostReason(LostReason.NOT_HELD))
                guard.release_on_drop = True
                return guard
        except BaseException as e:
            if progress.conn is None and progress.guard is None and isinstance(e, Exception):
                engine.registry.retire_if_empty(entry)
                raise
            _io.after_interruption(abandon, engine, entry, progress)
            raise


def measured_expiry(engine: Engine, entry: Entry, lease: float) -> tuple[float, bool, bool]:
    received = asked = monotonic()
    try:
        info = engine.counted.simple(entry.name, ["LOCK.INFO", entry.name])
        left = _protocol.lease_left(info, entry.field)
    except LockError:
        left = None
    if left is None:
        return received + lease, True, False
    holds, ttl = left
    if not holds:
        return asked, True, True
    return asked + min(ttl, lease), False, False


def abandon(engine: Engine, entry: Entry, progress: Progress) -> None:
    with entry.op:
        guard = progress.guard
        if guard is not None:  # its collection must not release it as well
            guard.release_on_drop = False
            if entry.holds > progress.known:  # recorded, but the caller has no guard
                engine.quietly(engine.release_locked, entry)
                return
        conn, wait = progress.conn, progress.wait
        if conn is not None or progress.sent:
            if conn is not None:
                progress.conn = None
                engine.quietly(_io.drop, progress.node, conn)
            with entry.mutex:
                known = entry.holds
            counted = engine.counted
            try:
                dead = [progress.cid] if conn is not None else []
                if wait is not None:
                    wait.give_up()
                    dead = wait.broken
                found = counted.read_back(entry, dead, False)
                while found > known:
                    args = [entry.kind.release, entry.name, entry.owner]
                    counted.counted(entry, args, found, found - 1)
                    found -= 1
            except Exception:
                pass
        engine.registry.retire_if_empty(entry)
