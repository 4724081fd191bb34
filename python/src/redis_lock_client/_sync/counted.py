"""Generated from ``_async/counted.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import Progress, monotonic
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


class Counted:
    def __init__(self, redis: Any, options: Options) -> None:
        self.redis = redis
        self.options = options

    def checkout(self, node: Any) -> tuple[Any, int | None]:
        conn = _io.get(node)
        try:
            cached = getattr(conn, "_rlc_id", None)
            if cached is None or cached[0] is not _io.socket(conn):
                _io.connect(conn)
                try:
                    cid = int(_io.execute(conn, ["CLIENT", "ID"], self.options.command_timeout))
                except rex.ResponseError:
                    cid = None  # NOPERM: no fence
                cached = (_io.socket(conn), cid)
                conn._rlc_id = cached
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
        blocks: bool = False,
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        o = self.options
        within = o.command_timeout if timeout is None else timeout
        if blocks:
            within = None if timeout is None else timeout + o.wait_margin
        attempt = 0
        while True:
            node = _io.route(self.redis, name)
            failure: BaseException
            try:
                conn, _ = self.checkout(node)  # a failure here sent nothing
            except TRANSPORT as e:
                failure = e
            else:
                try:
                    if blocks:
                        _io.send(conn, args)
                        answer = _io.reply(conn, within)
                    else:
                        answer = _io.execute(conn, args, within)
                except rex.ResponseError as e:
                    if not wrong_role(e):
                        _io.put(node, conn)
                        raise server_error(e) from e
                    failure = e
                except TRANSPORT as e:
                    if once:
                        _io.drop(node, conn)
                        raise OutcomeUnknown(name, str(args[0]), describe(e)) from e
                    failure = e
                except BaseException:
                    _io.drop(node, conn)
                    raise
                else:
                    _io.put(node, conn)
                    return answer if decode is None else decode(answer)
                _io.drop(node, conn)
            self.retry_pause(attempt, failure, retries)
            attempt += 1

    def counted(
        self,
        name: str,
        owner: str,
        field: str,
        command: list[Any] | Callable[[int], list[Any]],
        known: int,
        applied: int,
        within: float | None,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> tuple[bool, Any]:
        waits = not isinstance(command, list)
        attempt = 0
        while True:
            if isinstance(command, list):
                args, limit = command, within
            else:
                left = None if deadline is None else max(deadline - monotonic(), 0.0)
                args = command(0 if left is None else _protocol.wait_ms(left))
                limit = None if left is None else left + (within or 0.0)
            node = _io.route(self.redis, name)
            try:
                conn, cid = self.checkout(node)
            except TRANSPORT as e:  # nothing of this command was sent
                self.retry_pause(attempt, e)
                attempt += 1
                continue
            if progress is not None:
                progress.start(node, conn, cid, waits)
            failure: BaseException
            try:
                if waits:
                    _io.send(conn, args)
                    answer = _io.reply(conn, limit)
                else:
                    answer = _io.execute(conn, args, within)
            except rex.ResponseError as e:
                if progress is not None:
                    progress.conn = None
                if not wrong_role(e):
                    _io.put(node, conn)
                    raise refused(name, e) from e
                _io.drop(node, conn)
                self.retry_pause(attempt, e)
                attempt += 1
                continue
            except TRANSPORT as e:
                failure = e
            else:
                if progress is not None:
                    progress.conn = None
                _io.put(node, conn)
                return True, answer
            if progress is not None:
                progress.conn = None
            _io.drop(node, conn)
            found = self.read_back(name, owner, field, cid, waits)
            if found == applied:
                return False, None
            if found != known:
                raise HoldCountMismatch(name, [known, applied], found)
            self.retry_pause(attempt, failure)
            attempt += 1

    def read_back(self, name: str, owner: str, field: str, dead: int | None, waited: bool) -> int:
        try:
            fenced = False
            if dead is not None:
                try:
                    self.simple(name, ["CLIENT", "KILL", "ID", dead])
                    fenced = True
                except ServerError:
                    pass  # NOPERM, or closed already
            deadline = monotonic() + _protocol.short_timeout(self.options.command_timeout)
            while waited and not fenced and monotonic() < deadline:
                info = self.simple(name, ["LOCK.INFO", name])
                if not _protocol.waiters_include(info, owner):
                    break
                _io.sleep(0.005)
            return _protocol.hold_count(self.simple(name, ["HGET", name, field]))
        except LockError as e:
            raise Uncertain(name, f"reading the hold count back: {describe(e)}") from e
