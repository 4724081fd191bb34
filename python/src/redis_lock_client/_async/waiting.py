"""Waiting in the server's queue, and giving up: the one place where a
command blocks server-side (``... WAIT ms``, ``LOCK.AWAIT``) and where an
interrupted call is cleaned up.

A wait runs on a connection of its own, held out of the pool for the wait,
its reply awaited ``wait_margin`` longer than the server waits. A wait for
a hold (a lock, a read or write hold) whose connection broke is decided by
the read-back (``counted.py``): a grant made at that instant is adopted,
never leaked. A caller that gives up (a cancelled task, an interrupted
thread) cuts the connection; the server drops a waiter when it reads the
close, and :func:`abandon` fences it and gives back a grant made at that
instant, or one recorded whose guard never reached the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis import exceptions as rex

from .._holds import Entry, Progress, monotonic
from .._protocol import wait_ms
from ..errors import TRANSPORT, HoldCountMismatch, refused, wrong_role
from . import _io
from .engine import Engine


async def wait_counted(
    engine: Engine,
    entry: Entry,
    known: int,
    ask: Callable[[int], list[Any]],
    deadline: float | None,
    extra: float,
    progress: Progress,
) -> tuple[bool, Any] | None:
    """Queues ``ask(wait ms)`` (0: forever) for ``entry``'s hold until
    ``deadline`` (None: forever): (True, reply), (False, None) when granted
    but the reply was lost, None when the deadline passed."""
    counted, o = engine.counted, engine.options
    attempt = 0
    while True:
        remaining: float | None = None
        if deadline is not None:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return None
        args = ask(0 if remaining is None else wait_ms(remaining))
        node = await _io.route(counted.redis, entry.name)
        try:
            conn, cid = await counted.checkout(node)
        except TRANSPORT as e:
            await counted.retry_pause(attempt, e)
            attempt += 1
            continue
        progress.start(node, conn, cid, True)
        failure: BaseException
        try:
            await _io.send(conn, args)
            answer = await _io.reply(
                conn, None if remaining is None else remaining + o.wait_margin + extra
            )
        except rex.ResponseError as e:
            if not wrong_role(e):
                progress.conn = None
                await _io.put(node, conn)
                raise refused(entry.name, e) from e
            failure = e
        except TRANSPORT as e:
            failure = e
        else:
            progress.conn = None
            await _io.put(node, conn)
            return True, answer
        # Broken while waiting: was it granted at that instant?
        progress.conn = None
        await _io.drop(node, conn)
        found = await counted.read_back(entry.name, entry.owner, entry.field, cid, True)
        if found == known + 1:
            return False, None
        if found != known:
            raise HoldCountMismatch(entry.name, [known, known + 1], found)
        await counted.retry_pause(attempt, failure)
        attempt += 1


async def wait_once(engine: Engine, name: str, args: list[Any], within: float | None) -> Any:
    """A command that waits server-side up to ``within`` s (None: forever)
    and changes a count (a semaphore's, a latch's): sent at most once."""
    return await engine.counted.simple(name, args, within, once=True, blocks=True)


async def abandon(engine: Engine, entry: Entry, progress: Progress) -> None:
    """After an interrupted acquisition: a command still in flight is cut
    and fenced, and a grant it made is given back; so is one recorded whose
    guard never reached the caller. Runs with ``entry.op`` held."""
    async with entry.op:
        guard = progress.guard
        if guard is not None:
            # Recorded, but the caller has no guard: the hold goes back here
            # (the guard is disarmed, so its collection does not release it
            # a second time).
            guard.release_on_drop = False
            try:
                await engine.release_locked(entry)
            except Exception:
                pass  # lost already, or unreachable: the lease ends on its own
            return
        conn = progress.conn
        if conn is not None or progress.sent:
            # A command still in flight is cut (and fenced by the read-back);
            # one that completed may have granted what nothing recorded.
            if conn is not None:
                progress.conn = None
                try:
                    await _io.drop(progress.node, conn)
                except Exception:
                    pass
            with entry.mutex:
                known = entry.holds
            try:
                found = await engine.counted.read_back(
                    entry.name,
                    entry.owner,
                    entry.field,
                    progress.cid if conn is not None else None,
                    progress.waiting and conn is not None,
                )
                if found == known + 1:
                    await engine.counted.counted(
                        entry.name,
                        entry.owner,
                        entry.field,
                        [entry.kind.release, entry.name, entry.owner],
                        known + 1,
                        known,
                        engine.options.command_timeout,
                    )
            except Exception:
                pass
        engine.registry.retire_if_empty(entry)
