"""Generated from ``_async/counted.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

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
    OutcomeUnknown,
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

    def retry_pause(self, attempt: int, failure: BaseException) -> None:
        if attempt >= self.options.retries:
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
    ) -> Any:
        o = self.options
        retries = o.retries if retries is None else retries
        within = o.command_timeout if timeout is None else timeout
        if blocks:
            within = None if timeout is None else timeout + o.wait_margin
        failure: BaseException | None = None
        for attempt in range(retries + 1):
            if attempt:
                if wrong_role(failure or Exception()):
                    _io.moved(self.redis)
                _io.sleep(o.retry_interval)
            node = _io.route(self.redis, name)
            try:
                conn = _io.get(node)
                if once:
                    try:
                        _io.connect(conn)  # nothing sent yet: a failure is retried
                    except BaseException:
                        _io.drop(node, conn)
                        raise
            except TRANSPORT as e:
                failure = e
                continue
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
                return answer
            _io.drop(node, conn)
        raise ConnectionLost(describe(failure)) from failure

    def call(
        self,
        name: str,
        args: list[Any],
        decode: Callable[[Any], Any],
        once: bool = False,
        within: float | None = None,
        blocks: bool = False,
    ) -> Any:
        return decode(self.simple(name, args, within, once=once, blocks=blocks))

    def counted(
        self,
        name: str,
        owner: str,
        field: str,
        args: list[Any],
        known: int,
        applied: int,
        within: float | None,
        progress: Progress | None = None,
    ) -> tuple[bool, Any]:
        attempt = 0
        while True:
            node = _io.route(self.redis, name)
            try:
                conn, cid = self.checkout(node)
            except TRANSPORT as e:  # nothing of this command was sent
                self.retry_pause(attempt, e)
                attempt += 1
                continue
            if progress is not None:
                progress.start(node, conn, cid, False)
            failure: BaseException
            try:
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
            found = self.read_back(name, owner, field, cid, False)
            if found == applied:
                return False, None
            if found != known:
                raise HoldCountMismatch(name, [known, applied], found)
            self.retry_pause(attempt, failure)
            attempt += 1

    def read_back(self, name: str, owner: str, field: str, dead: int | None, waited: bool) -> int:
        o = self.options
        last: BaseException | None = None
        for attempt in range(o.retries + 1):
            if attempt:
                _io.sleep(o.retry_interval)
            node = _io.route(self.redis, name)
            try:
                conn = _io.get(node)
            except TRANSPORT as e:
                last = e
                continue
            try:
                fenced = False
                if dead is not None:
                    try:
                        _io.execute(conn, ["CLIENT", "KILL", "ID", dead], o.command_timeout)
                        fenced = True
                    except rex.ResponseError:
                        pass  # NOPERM
                if waited and not fenced:
                    self.await_dequeued(conn, name, owner)
                reply = _io.execute(conn, ["HGET", name, field], o.command_timeout)
            except TRANSPORT as e:
                _io.drop(node, conn)
                last = e
                continue
            except rex.ResponseError as e:
                _io.put(node, conn)
                last = e
                continue
            except BaseException:
                _io.drop(node, conn)
                raise
            _io.put(node, conn)
            return _protocol.hold_count(reply)
        raise Uncertain(name, f"reading the hold count back: {describe(last)}")

    def await_dequeued(self, conn: Any, name: str, owner: str) -> None:
        timeout = self.options.command_timeout
        deadline = monotonic() + _protocol.short_timeout(timeout)
        while monotonic() < deadline:
            info = _io.execute(conn, ["LOCK.INFO", name], timeout)
            if not _protocol.waiters_include(info, owner):
                return
            _io.sleep(0.005)
