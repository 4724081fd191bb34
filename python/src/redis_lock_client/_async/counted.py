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
(``once``).

A command that waits server-side (``... WAIT ms``, ``LOCK.AWAIT``) runs on
a connection of its own, held out of the pool for the wait, its reply
awaited ``wait_margin`` longer than the server waits. A wait for a hold
whose connection broke is decided by the read-back: a grant made at that
instant is adopted, never leaked.
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

    async def retry_pause(
        self, attempt: int, failure: BaseException, retries: int | None = None
    ) -> None:
        """Before attempt ``attempt + 1``; ConnectionLost once ``retries``
        (the options' when None) are spent."""
        if attempt >= (self.options.retries if retries is None else retries):
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
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        """One command routed by ``name``, its reply (``decode``'s of it),
        resent after a failure (harmless for a read or a renewal). ``once``:
        it changes a count (a semaphore's, a latch's), so once it may have
        run it is never resent: :class:`OutcomeUnknown` if its connection
        fails after it was sent. ``blocks``: it waits server-side up to
        ``timeout`` s (None: forever) on a connection held out of the pool,
        its reply awaited ``wait_margin`` longer; given up, the connection
        is closed (the server drops a waiter when it reads the close)."""
        o = self.options
        within = o.command_timeout if timeout is None else timeout
        if blocks:
            within = None if timeout is None else timeout + o.wait_margin
        attempt = 0
        while True:
            node = await _io.route(self.redis, name)
            failure: BaseException
            try:
                conn, _ = await self.checkout(node)  # a failure here sent nothing
            except TRANSPORT as e:
                failure = e
            else:
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
                    return answer if decode is None else decode(answer)
                await _io.drop(node, conn)
            await self.retry_pause(attempt, failure, retries)
            attempt += 1

    async def counted(
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
        """Runs a command that moves ``owner``'s count (hash field ``field``)
        from ``known`` to ``applied``, resent only when the server shows it
        did not run: (True, reply), or (False, None) when it ran but its
        reply was lost. A wait is given as ``command(ms)``, made again for
        each attempt with the ms left until ``deadline`` (0 for None:
        forever; 1 once it passed: one last look), its reply awaited
        ``within`` longer than that."""
        waits = not isinstance(command, list)
        attempt = 0
        while True:
            if isinstance(command, list):
                args, limit = command, within
            else:
                left = None if deadline is None else max(deadline - monotonic(), 0.0)
                args = command(0 if left is None else _protocol.wait_ms(left))
                limit = None if left is None else left + (within or 0.0)
            node = await _io.route(self.redis, name)
            try:
                conn, cid = await self.checkout(node)
            except TRANSPORT as e:  # nothing of this command was sent
                await self.retry_pause(attempt, e)
                attempt += 1
                continue
            if progress is not None:
                progress.start(node, conn, cid, waits)
            failure: BaseException
            try:
                if waits:
                    await _io.send(conn, args)
                    answer = await _io.reply(conn, limit)
                else:
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
            # Broken in transit (while waiting: was it granted at that instant?)
            found = await self.read_back(name, owner, field, cid, waits)
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
        try:
            fenced = False
            if dead is not None:
                try:
                    await self.simple(name, ["CLIENT", "KILL", "ID", dead])
                    fenced = True
                except ServerError:
                    pass  # NOPERM, or closed already
            deadline = monotonic() + _protocol.short_timeout(self.options.command_timeout)
            while waited and not fenced and monotonic() < deadline:
                info = await self.simple(name, ["LOCK.INFO", name])
                if not _protocol.waiters_include(info, owner):
                    break
                await _io.sleep(0.005)
            return _protocol.hold_count(await self.simple(name, ["HGET", name, field]))
        except LockError as e:
            raise Uncertain(name, f"reading the hold count back: {describe(e)}") from e
