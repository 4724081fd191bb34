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
    """The client's connection to its server(s), and the retry rules."""

    def __init__(self, redis: Any, options: Options) -> None:
        self.redis = redis
        self.options = options
        self.cluster = _protocol.is_cluster(redis)

    async def checkout(self, node: Any, ident: bool = True) -> tuple[Any, int | None]:
        """A connection out of ``node``'s pool and, if ``ident``, its server
        id (asked once per socket, to fence it after a failure; None when
        ACLs deny it); on failure it goes back closed. A command resent
        after a failure needs no id: a renewal on a new connection is not
        delayed by asking for one."""
        pool = node.connection_pool
        conn = await _protocol.taker(pool)(pool)
        if not ident:
            return conn, None
        try:
            cached = getattr(conn, "_rlc_id", None)
            if cached is None or cached[0] is not _io.socket(conn):
                await conn.connect()
                try:
                    cid = int(
                        await _io.execute(conn, ["CLIENT", "ID"], self.options.command_timeout)
                    )
                except rex.ResponseError:
                    cid = None  # NOPERM: no fence
                cached = conn._rlc_id = (_io.socket(conn), cid)
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
        decode: Callable[[Any], Any] | None = None,
        progress: Progress | None = None,
    ) -> Any:
        """One command routed by ``name``, its reply (``decode``'s of it),
        resent after a failure (harmless for a read or a renewal). ``once``:
        it changes a count, so once it may have run it is never resent:
        :class:`OutcomeUnknown` (with the connection's id) if its connection
        fails after it was sent. ``progress``: the connection is left there
        for ``abandon`` when the caller is interrupted."""
        within = self.options.command_timeout if timeout is None else timeout
        attempt = 0
        while True:
            node = await _io.route(self.redis, name) if self.cluster else self.redis
            failure: BaseException
            try:
                conn, cid = await self.checkout(node, once)  # a failure here sent nothing
            except TRANSPORT as e:
                failure = e
            else:
                if progress is not None:
                    progress.start(node, conn, cid)
                try:
                    answer = await _io.execute(conn, args, within)
                except Exception as e:
                    if progress is not None:
                        progress.conn = None
                    if isinstance(e, rex.ResponseError) and not wrong_role(e):
                        await _io.put(node, conn)
                        raise refused(name, e) from e
                    await _io.drop(node, conn)
                    if once and not isinstance(e, rex.ResponseError):
                        raise OutcomeUnknown(name, str(args[0]), describe(e), cid) from e
                    if not isinstance(e, (rex.ResponseError, *TRANSPORT)):
                        raise
                    failure = e
                except BaseException:
                    if progress is None:
                        await _io.drop(node, conn)
                    raise
                else:
                    if progress is not None:
                        progress.conn = None
                    await _io.put(node, conn)
                    return answer if decode is None else decode(answer)
            await self.retry_pause(attempt, failure, retries)
            attempt += 1

    async def queued(
        self,
        name: str,
        make: Callable[[int], list[Any]],
        final: Callable[[Any], bool],
        wait: float | None,
        granted: Callable[[list[Any]], Any],
        give_back: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any],
    ) -> Any:
        """A wait of the ownerless kinds (semaphore, permits, latch) for
        ``wait`` s (None: forever), under a waiter id of its own: the reply
        that ended it, or the last piece's. Given up or broken in transit,
        it is cancelled (``Wait.give_up``); a grant made meanwhile (a
        piece's reply, or ``granted(what the cancel says)``: one at most)
        is adopted when a connection broke, given to ``give_back`` when the
        caller was interrupted. The reply is returned ``decode``d."""
        who = _protocol.new_client_id()
        deadline = None if wait is None else monotonic() + wait
        node = await _io.route(self.redis, name)

        def piece(ms: int) -> list[Any]:
            return [*make(ms), "WAITER", who]

        w = Wait(self, node, name, who, piece, final)
        try:
            answer = await w.run(deadline, self.options.wait_margin)
        except BaseException as e:
            if not isinstance(e, Exception):  # interrupted: its pieces are read there
                _io.after_interruption(self.given_up, w, granted, give_back)
                raise
            if not isinstance(e, TRANSPORT):
                await w.close()
                if isinstance(e, rex.ResponseError):
                    raise server_error(e) from e
                raise
            grant = await self.given_up(w, granted, None)
            if grant is None:
                raise ConnectionLost(describe(e)) from e
            return decode(grant)
        await w.close()
        return decode(answer)

    async def given_up(self, w: Wait, granted: Callable[[list[Any]], Any], give_back: Any) -> Any:
        """Cancels ``w``: the grant it had (None), given back if asked."""
        replies = await w.give_up()
        for r in replies:
            said = isinstance(r, list) and _protocol.text(r[0]) == "granted"
            grant = granted(r[1:]) if said else r
            if give_back is not None:
                await give_back(grant)
            return grant
        return None

    async def counted(
        self,
        entry: Entry,
        command: list[Any] | Callable[[int], list[Any]],
        known: int,
        applied: int,
        within: float | None = None,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> tuple[bool, Any]:
        """Runs a command that moves ``entry``'s hold count from ``known`` to
        ``applied``, its reply awaited ``within`` (None: the options' command
        timeout), resent only when the server shows it did not run: (True,
        reply), or (False, None) when it ran but its reply was lost. A wait
        is given as ``command(ms)``: it waits until ``deadline`` (None:
        forever) in pieces (``waiting.Wait``), each reply awaited ``within``
        longer than its piece."""
        name, attempt = entry.name, 0
        while True:
            dead: list[int | None] = []
            failure: BaseException
            try:
                if isinstance(command, list):
                    answer = await self.simple(name, command, within, once=True, progress=progress)
                else:
                    node = await _io.route(self.redis, name)
                    wait = Wait(self, node, name, entry.owner, command, _protocol.acquired)
                    if progress is not None:
                        progress.wait, progress.sent = wait, True
                    try:
                        answer = await wait.run(deadline, within or 0.0)
                    except Exception:
                        await wait.close()  # an interruption leaves it to ``abandon``
                        dead = wait.broken
                        raise
                    finally:
                        if progress is not None:
                            progress.sent_at = wait.sent_at
                    await wait.close()
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
                found = await self.read_back(entry, dead, waited)
                if found == applied:
                    return False, None
                if found != known:
                    raise HoldCountMismatch(name, [known, applied], found) from failure
            await self.retry_pause(attempt, failure)
            attempt += 1

    async def read_back(self, entry: Entry, dead: list[int | None], waited: bool) -> int:
        """The server's hold count of ``entry`` after a failure in transit on
        the connections with ids ``dead``, fenced first; ``waited``: it was a
        wait, which without the kill is ended by its owner's ``LOCK.CANCEL``
        before the count is read."""
        name = entry.name
        try:
            fenced = None not in dead  # a connection without an id cannot be killed
            for cid in dead:
                if cid is not None:
                    try:
                        await self.simple(name, ["CLIENT", "KILL", "ID", cid])
                    except ServerError:
                        fenced = False  # NOPERM, or closed already
            if waited and not fenced:
                await self.simple(name, ["LOCK.CANCEL", name, entry.owner])
            return _protocol.hold_count(await self.simple(name, ["HGET", name, entry.field]))
        except LockError as e:
            raise Uncertain(name, f"reading the hold count back: {describe(e)}") from e
