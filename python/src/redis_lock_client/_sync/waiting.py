"""Generated from ``_async/waiting.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis import exceptions as rex

from .._holds import Entry, Progress, monotonic
from .._protocol import wait_ms
from ..errors import TRANSPORT, HoldCountMismatch, refused, wrong_role
from . import _io
from .engine import Engine


def wait_counted(
    engine: Engine,
    entry: Entry,
    known: int,
    ask: Callable[[int], list[Any]],
    deadline: float | None,
    extra: float,
    progress: Progress,
) -> tuple[bool, Any] | None:
    counted, o = engine.counted, engine.options
    attempt = 0
    while True:
        remaining: float | None = None
        if deadline is not None:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return None
        args = ask(0 if remaining is None else wait_ms(remaining))
        node = _io.route(counted.redis, entry.name)
        try:
            conn, cid = counted.checkout(node)
        except TRANSPORT as e:
            counted.retry_pause(attempt, e)
            attempt += 1
            continue
        progress.start(node, conn, cid, True)
        failure: BaseException
        try:
            _io.send(conn, args)
            answer = _io.reply(
                conn, None if remaining is None else remaining + o.wait_margin + extra
            )
        except rex.ResponseError as e:
            if not wrong_role(e):
                progress.conn = None
                _io.put(node, conn)
                raise refused(entry.name, e) from e
            failure = e
        except TRANSPORT as e:
            failure = e
        else:
            progress.conn = None
            _io.put(node, conn)
            return True, answer
        progress.conn = None
        _io.drop(node, conn)
        found = counted.read_back(entry.name, entry.owner, entry.field, cid, True)
        if found == known + 1:
            return False, None
        if found != known:
            raise HoldCountMismatch(entry.name, [known, known + 1], found)
        counted.retry_pause(attempt, failure)
        attempt += 1


def wait_once(engine: Engine, name: str, args: list[Any], within: float | None) -> Any:
    return engine.counted.simple(name, args, within, once=True, blocks=True)


def abandon(engine: Engine, entry: Entry, progress: Progress) -> None:
    with entry.op:
        guard = progress.guard
        if guard is not None:
            guard.release_on_drop = False
            try:
                engine.release_locked(entry)
            except Exception:
                pass  # lost already, or unreachable: the lease ends on its own
            return
        conn = progress.conn
        if conn is not None or progress.sent:
            if conn is not None:
                progress.conn = None
                try:
                    _io.drop(progress.node, conn)
                except Exception:
                    pass
            with entry.mutex:
                known = entry.holds
            try:
                found = engine.counted.read_back(
                    entry.name,
                    entry.owner,
                    entry.field,
                    progress.cid if conn is not None else None,
                    progress.waiting and conn is not None,
                )
                if found == known + 1:
                    engine.counted.counted(
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
