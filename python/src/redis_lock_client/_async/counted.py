"""Sending commands, and retries that cannot count twice.

Every command goes out on a connection taken from the redis-py pool (never
through redis-py's own retry, which resends blindly), and what comes back
is classified in one place: a reply; the server's refusal (nothing ran,
the connection is in order); a server that is no master or a key that moved
(nothing ran: retried after the layout is learnt); a connection that failed
with the command in flight (it may have run: the connection is dropped).

Why retries are safe (the Rust crate's argument): commands that change a
hold count are serialised per (lock, owner), so the count this client
keeps is the server's. After a failure in transit the client kills the
failed connection by id from another one (``CLIENT KILL ID``: once that
returns, the server has run all it read from it and reads nothing more),
then reads ``HGET lock field``: the old count + 1 (acquire) or - 1
(release) means the command ran, so it is not sent again; the old count
means it did not, so it is resent; anything else is
:class:`HoldCountMismatch`. Commands that change another count (a
semaphore's, a latch's) cannot be read back: they are sent at most once
(:meth:`Counted.once`).
"""

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
    """The client's connection to its server(s), and the retry rules."""

    def __init__(self, redis: Any, options: Options) -> None:
        self.redis = redis
        self.options = options

    async def checkout(self, node: Any) -> tuple[Any, int | None]:
        """A connection out of ``node``'s pool and its server id (asked once
        per socket; None when ACLs deny it); on failure it goes back closed."""
        conn = await _io.get(node)
        try:
            cached = getattr(conn, "_rlc_id", None)
            if cached is None or cached[0] is not _io.socket(conn):
                await _io.connect(conn)
                try:
                    cid = int(
                        await _io.execute(conn, ["CLIENT", "ID"], self.options.command_timeout)
                    )
                except rex.ResponseError:
                    cid = None  # NOPERM: no fence
                cached = (_io.socket(conn), cid)
                conn._rlc_id = cached
            return conn, cached[1]
        except BaseException:
            await _io.drop(node, conn)
            raise

    async def retry_pause(self, attempt: int, failure: BaseException) -> None:
        """Before attempt ``attempt + 1``; ConnectionLost once retries are spent."""
        if attempt >= self.options.retries:
            raise ConnectionLost(describe(failure)) from failure
        if wrong_role(failure):
            await _io.moved(self.redis)
        await _io.sleep(self.options.retry_interval)

    async def simple(
        self,
        name: str,
        args: list[Any],
        timeout: float | None = None,
        retries: int | None = None,
        *,
        once: bool = False,
        blocks: bool = False,
    ) -> Any:
        """One command routed by ``name``, resent after a failure (harmless
        for a read or a renewal). ``once``: it changes a count (a
        semaphore's, a latch's), so once it may have run it is never
        resent: :class:`OutcomeUnknown` if its connection fails after it was
        sent. ``blocks``: it waits server-side up to ``timeout`` s (None:
        forever) on a connection held out of the pool, its reply awaited
        ``wait_margin`` longer; given up, the connection is closed (the
        server drops a waiter when it reads the close)."""
        o = self.options
        retries = o.retries if retries is None else retries
        within = o.command_timeout if timeout is None else timeout
        if blocks:
            within = None if timeout is None else timeout + o.wait_margin
        failure: BaseException | None = None
        for attempt in range(retries + 1):
            if attempt:
                if wrong_role(failure or Exception()):
                    await _io.moved(self.redis)
                await _io.sleep(o.retry_interval)
            node = await _io.route(self.redis, name)
            try:
                conn = await _io.get(node)
                if once:
                    try:
                        await _io.connect(conn)  # nothing sent yet: a failure is retried
                    except BaseException:
                        await _io.drop(node, conn)
                        raise
            except TRANSPORT as e:
                failure = e
                continue
            try:
                if blocks:
                    await _io.send(conn, args)
                    answer = await _io.reply(conn, within)
                else:
                    answer = await _io.execute(conn, args, within)
            except rex.ResponseError as e:
                if not wrong_role(e):
                    await _io.put(node, conn)
                    raise server_error(e) from e
                failure = e
            except TRANSPORT as e:
                if once:
                    await _io.drop(node, conn)
                    raise OutcomeUnknown(name, str(args[0]), describe(e)) from e
                failure = e
            except BaseException:
                await _io.drop(node, conn)
                raise
            else:
                await _io.put(node, conn)
                return answer
            await _io.drop(node, conn)
        raise ConnectionLost(describe(failure)) from failure

    async def call(
        self,
        name: str,
        args: list[Any],
        decode: Callable[[Any], Any],
        once: bool = False,
        within: float | None = None,
        blocks: bool = False,
    ) -> Any:
        """:meth:`simple`'s reply, decoded."""
        return decode(await self.simple(name, args, within, once=once, blocks=blocks))

    async def counted(
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
        """Runs a command that moves ``owner``'s count (hash field ``field``)
        from ``known`` to ``applied``, resent only when the server shows it
        did not run: (True, reply), or (False, None) when it ran but its
        reply was lost."""
        attempt = 0
        while True:
            node = await _io.route(self.redis, name)
            try:
                conn, cid = await self.checkout(node)
            except TRANSPORT as e:  # nothing of this command was sent
                await self.retry_pause(attempt, e)
                attempt += 1
                continue
            if progress is not None:
                progress.start(node, conn, cid, False)
            failure: BaseException
            try:
                answer = await _io.execute(conn, args, within)
            except rex.ResponseError as e:
                if progress is not None:
                    progress.conn = None
                if not wrong_role(e):
                    await _io.put(node, conn)
                    raise refused(name, e) from e
                await _io.drop(node, conn)
                await self.retry_pause(attempt, e)
                attempt += 1
                continue
            except TRANSPORT as e:
                failure = e
            else:
                if progress is not None:
                    progress.conn = None
                await _io.put(node, conn)
                return True, answer
            if progress is not None:
                progress.conn = None
            await _io.drop(node, conn)
            found = await self.read_back(name, owner, field, cid, False)
            if found == applied:
                return False, None
            if found != known:
                raise HoldCountMismatch(name, [known, applied], found)
            await self.retry_pause(attempt, failure)
            attempt += 1

    async def read_back(
        self, name: str, owner: str, field: str, dead: int | None, waited: bool
    ) -> int:
        """The server's hold count of ``owner`` (hash field ``field``) after
        a failure in transit on the connection with id ``dead``, fenced
        first; ``waited``: it was a wait, which without the kill is seen
        leaving the queue (``LOCK.INFO``) before the count is read."""
        o = self.options
        last: BaseException | None = None
        for attempt in range(o.retries + 1):
            if attempt:
                await _io.sleep(o.retry_interval)
            node = await _io.route(self.redis, name)
            try:
                conn = await _io.get(node)
            except TRANSPORT as e:
                last = e
                continue
            try:
                fenced = False
                if dead is not None:
                    try:
                        await _io.execute(conn, ["CLIENT", "KILL", "ID", dead], o.command_timeout)
                        fenced = True
                    except rex.ResponseError:
                        pass  # NOPERM
                if waited and not fenced:
                    await self.await_dequeued(conn, name, owner)
                reply = await _io.execute(conn, ["HGET", name, field], o.command_timeout)
            except TRANSPORT as e:
                await _io.drop(node, conn)
                last = e
                continue
            except rex.ResponseError as e:
                await _io.put(node, conn)
                last = e
                continue
            except BaseException:
                await _io.drop(node, conn)
                raise
            await _io.put(node, conn)
            return _protocol.hold_count(reply)
        raise Uncertain(name, f"reading the hold count back: {describe(last)}")

    async def await_dequeued(self, conn: Any, name: str, owner: str) -> None:
        """Without a kill, the dropped waiter leaves the queue when the
        server reads its close: ``LOCK.INFO`` until then."""
        timeout = self.options.command_timeout
        deadline = monotonic() + _protocol.short_timeout(timeout)
        while monotonic() < deadline:
            info = await _io.execute(conn, ["LOCK.INFO", name], timeout)
            if not _protocol.waiters_include(info, owner):
                return
            await _io.sleep(0.005)
