"""Taking a hold: the one acquisition path of every lock API (``lock``,
``try_lock``, the read-write lock's, the fenced forms, ``MultiLock``, the
drop-in). The kind of hold picks the commands and the hash field a
read-back counts; nothing else differs.

An acquisition tries once on a pooled connection, then, if the lock is
busy and the caller waits, queues in the server (``Counted.counted`` with
a wait). Either send may break in transit: the hold count decides whether
it ran. A wait goes in pieces that keep their place (``waiting.Wait``).
A caller that gives up (a cancelled task, ``KeyboardInterrupt``) leaves
:func:`abandon` to cancel the wait (``LOCK.CANCEL``) and give back a grant
made at that instant, or one recorded whose guard never reached the
caller: no grant is left behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _protocol
from .._holds import Entry, LostCallback, Progress, monotonic
from .._protocol import LOCK, Kind, LostReason, Number
from ..errors import LockError, ProtocolViolation
from . import _io
from .engine import Engine


async def acquire(
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
    """A guard (``make_guard``'s) for a grant to the owner ``whose()``
    names, or None when none came within ``wait`` s (None: as long as it
    takes; 0: one attempt). Without ``lease`` the watchdog keeps the hold."""
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
            async with entry.op:
                if entry.retired:
                    continue
                known = progress.known = entry.holds
                counted = engine.counted.counted
                seen, reply = await counted(entry, once, known, known + 1, within, progress)
                got, token = _protocol.parse_acquire(reply, fenced) if seen else (True, None)
                if not got and (wait is None or wait > 0):
                    margin = o.wait_margin + (o.sync_time() if sync is not None else 0.0)

                    def ask(wait_ms: int) -> list[Any]:
                        return _protocol.acquire_args(name, owner, ms, wait_ms, fenced, sync, kind)

                    seen, reply = await counted(
                        entry, ask, known, known + 1, margin, progress, deadline
                    )
                    got, token = _protocol.parse_acquire(reply, fenced) if seen else (True, None)
                    if progress.wait is not None and progress.wait.crossed:
                        # A piece crossed the grant and re-entered: one back.
                        args = _protocol.release_args(kind, name, owner, known + 2, lease_s)
                        await counted(entry, args, known + 2, known + 1, within)
                if not got:
                    engine.registry.retire_if_empty(entry)
                    if wait is None:
                        raise ProtocolViolation(f"{kind.acquire} ... WAIT 0 answered {reply!r}")
                    return None
                if fenced and not seen:
                    v = await engine.counted.simple(name, ["GET", _protocol.token_key(name)])
                    token = None if v is None else int(v)
                # The lease runs from the grant, known only as 'after the
                # request': a reply within a third of the lease counts from
                # the request, a later one is measured.
                expires, renew_now, gone = progress.sent_at + lease_s, False, False
                if monotonic() >= progress.sent_at + lease_s / 3:
                    expires, renew_now, gone = await measured_expiry(engine, entry, lease_s)
                # Made disarmed before the grant is recorded, armed as the last
                # step: an interruption in between leaves ``abandon`` a guard.
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
                # A failure reported as such: nothing is in flight.
                engine.registry.retire_if_empty(entry)
                raise
            _io.after_interruption(abandon, engine, entry, progress)
            raise


async def measured_expiry(engine: Engine, entry: Entry, lease: float) -> tuple[float, bool, bool]:
    """(expires, renew now, gone) of a grant answered later than a third of
    its lease after the request: the lease ran from the grant, somewhere in
    between, so it is read from the server."""
    received = asked = monotonic()
    try:
        info = await engine.counted.simple(entry.name, ["LOCK.INFO", entry.name])
        left = _protocol.lease_left(info, entry.field)
    except LockError:
        left = None
    if left is None:
        return received + lease, True, False
    holds, ttl = left
    if not holds:
        return asked, True, True
    return asked + min(ttl, lease), False, False


async def abandon(engine: Engine, entry: Entry, progress: Progress) -> None:
    """After an interrupted acquisition: a command still in flight is cut
    and fenced, and a grant it made is given back; so is one recorded whose
    guard never reached the caller. Runs with ``entry.op`` held."""
    async with entry.op:
        guard = progress.guard
        if guard is not None:  # its collection must not release it as well
            guard.release_on_drop = False
            if entry.holds > progress.known:  # recorded, but the caller has no guard
                await engine.quietly(engine.release_locked, entry)
                return
        conn, wait = progress.conn, progress.wait
        if conn is not None or progress.sent:
            # A command still in flight is cut (and fenced by the read-back);
            # a wait is cancelled (``LOCK.CANCEL``) until its pieces answered
            # (those that do not are cut and fenced); either may have granted
            # what nothing recorded: the count read back says.
            if conn is not None:
                progress.conn = None
                await engine.quietly(_io.drop, progress.node, conn)
            with entry.mutex:
                known = entry.holds
            counted = engine.counted
            try:
                dead = [progress.cid] if conn is not None else []
                if wait is not None:
                    await wait.give_up()
                    dead = wait.broken
                found = await counted.read_back(entry, dead, False)
                while found > known:
                    args = [entry.kind.release, entry.name, entry.owner]
                    await counted.counted(entry, args, found, found - 1)
                    found -= 1
            except Exception:
                pass
        engine.registry.retire_if_empty(entry)
