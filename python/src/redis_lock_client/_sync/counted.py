"""Generated from ``_async/counted.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import Entry, Progress, monotonic
from .._protocol import Options
from ..errors import (
    TRANSPORT,
    ConnectionLost,
    HoldCountMismatch,
    LockError,
    OutcomeUnknown,
    ServerError,
    Uncertain,
    describe,
    refused,
    server_error,
    wrong_role,
)
from . import _io
from .waiting import Wait


class Counted:
    def __init__(self, redis: Any, options: Options) -> None:
        self.redis = redis
        self.options = options
        self.cluster = _protocol.is_cluster(redis)

    def checkout(self, node: Any, ident: bool = True) -> tuple[Any, int | None]:
        pool = node.connection_pool
        conn = _protocol.taker(pool)(pool)
        if not ident:
            return conn, None
        try:
            cached = getattr(conn, "_rlc_id", None)
            if cached is None or cached[0] is not _io.socket(conn):
                conn.connect()
                try:
                    cid = int(_io.execute(conn, ["CLIENT", "ID"], self.options.command_timeout))
                except rex.ResponseError:
                    cid = None  # NOPERM: no fence
                cached = conn._rlc_id = (_io.socket(conn), cid)
            return conn, cached[1]
        except BaseException:
            _io.drop(node, conn)
            raise

    def retry_pause(self, attempt: int, failure: BaseException, retries: int | None = None) -> None:
        if attempt >= (self.options.retries if retries is None else retries):
            raise ConnectionLost(describe(failure)) from failure
        if wrong_role(failure):
            _io.moved(self.redis)
        _io.sleep(self.options.retry_interval)

    def simple(
        self,
        name: str,
        args: list[Any],
        timeout: float | None = None,
        retries: int | None = None,
        *,
        once: bool = False,
        decode: Callable[[Any], Any] | None = None,
        progress: Progress | None = None,
    ) -> Any:
        within = self.options.command_timeout if timeout is None else timeout
        attempt = 0
        while True:
            node = _io.route(self.redis, name) if self.cluster else self.redis
            failure: BaseException
            try:
                conn, cid = self.checkout(node, once)  # a failure here sent nothing
            except TRANSPORT as e:
                failure = e
            else:
                if progress is not None:
                    progress.start(node, conn, cid)
                try:
                    answer = _io.execute(conn, args, within)
                except Exception as e:
                    if progress is not None:
                        progress.conn = None
                    if isinstance(e, rex.ResponseError) and not wrong_role(e):
                        _io.put(node, conn)
                        raise refused(name, e) from e
                    _io.drop(node, conn)
                    if once and not isinstance(e, rex.ResponseError):
                        raise OutcomeUnknown(name, str(args[0]), describe(e), cid) from e
                    if not isinstance(e, (rex.ResponseError, *TRANSPORT)):
                        raise
                    failure = e
                except BaseException:
                    if progress is None:
                        _io.drop(node, conn)
                    raise
                else:
                    if progress is not None:
                        progress.conn = None
                    _io.put(node, conn)
                    return answer if decode is None else decode(answer)
            self.retry_pause(attempt, failure, retries)
            attempt += 1

    def queued(
        self,
        name: str,
        make: Callable[[int], list[Any]],
        final: Callable[[Any], bool],
        wait: float | None,
        granted: Callable[[list[Any]], Any],
        give_back: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any],
    ) -> Any:
        who = _protocol.new_client_id()
        deadline = None if wait is None else monotonic() + wait
        node = _io.route(self.redis, name)

        def piece(ms: int) -> list[Any]:
            return [*make(ms), "WAITER", who]

        w = Wait(self, node, name, who, piece, final)
        try:
            answer = w.run(deadline, self.options.wait_margin)
        except BaseException as e:
            if not isinstance(e, Exception):  # interrupted: its pieces are read there
                _io.after_interruption(self.given_up, w, granted, give_back)
                raise
            if not isinstance(e, TRANSPORT):
                w.close()
                if isinstance(e, rex.ResponseError):
                    raise server_error(e) from e
                raise
            grant = self.given_up(w, granted, None)
            if grant is None:
                raise ConnectionLost(describe(e)) from e
            return decode(grant)
        w.close()
        return decode(answer)

    def given_up(self, w: Wait, granted: Callable[[list[Any]], Any], give_back: Any) -> Any:
        replies = w.give_up()
        for r in replies:
            said = isinstance(r, list) and _protocol.text(r[0]) == "granted"
            grant = granted(r[1:]) if said else r
            if give_back is not None:
                give_back(grant)
            return grant
        return None

    def counted(
        self,
        entry: Entry,
        command: list[Any] | Callable[[int], list[Any]],
        known: int,
        applied: int,
        within: float | None = None,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> tuple[bool, Any]:
        name, attempt = entry.name, 0
        while True:
            dead: list[int | None] = []
            failure: BaseException
            try:
                if isinstance(command, list):
                    answer = self.simple(name, command, within, once=True, progress=progress)
                else:
                    node = _io.route(self.redis, name)
                    wait = Wait(self, node, name, entry.owner, command, _protocol.acquired)
                    if progress is not None:
                        progress.wait, progress.sent = wait, True
                    try:
                        answer = wait.run(deadline, within or 0.0)
                    except Exception:
                        wait.close()  # an interruption leaves it to ``abandon``
                        dead = wait.broken
                        raise
                    finally:
                        if progress is not None:
                            progress.sent_at = wait.sent_at
                    wait.close()
                return True, answer
            except OutcomeUnknown as e:
                failure, dead = e, [e.cid]
            except LockError:
                raise
            except rex.ResponseError as e:
                if not wrong_role(e):
                    raise refused(name, e) from e
                failure = e
            except TRANSPORT as e:
                failure = e
            if dead:  # broken in transit (while waiting: granted at that instant?)
                waited = not isinstance(command, list)
                found = self.read_back(entry, dead, waited)
                if found == applied:
                    return False, None
                if found != known:
                    raise HoldCountMismatch(name, [known, applied], found) from failure
            self.retry_pause(attempt, failure)
            attempt += 1

    def read_back(self, entry: Entry, dead: list[int | None], waited: bool) -> int:
        name = entry.name
        try:
            fenced = None not in dead  # a connection without an id cannot be killed
            for cid in dead:
                if cid is not None:
                    try:
                        self.simple(name, ["CLIENT", "KILL", "ID", cid])
                    except ServerError:
                        fenced = False  # NOPERM, or closed already
            if waited and not fenced:
                self.simple(name, ["LOCK.CANCEL", name, entry.owner])
            return _protocol.hold_count(self.simple(name, ["HGET", name, entry.field]))
        except LockError as e:
            raise Uncertain(name, f"reading the hold count back: {describe(e)}") from e
