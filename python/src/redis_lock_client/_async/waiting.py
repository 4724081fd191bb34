"""A wait in the server's queue, cut into pieces that keep their place,
and given up by ``LOCK.CANCEL`` (the protocol is docs/waiting.md's).

A driver does not let a connection wait long (redis-py's
``socket_timeout``, a proxy's idle timeout), so a wait longer than
``Options.wait_piece`` is sent as pieces of that length, each but the
last sent on the other of two connections a quarter of a piece before
the one before it ends: the new piece takes its identity's place in the
queue (the one before is answered at once, as timed out), so the waiter
is never absent from the queue and no newcomer overtakes it. A piece may
cross its predecessor's grant: the lock kinds then hold once more (the
caller gives one back), the ownerless kinds are answered the same grant.

A given-up wait (a cancelled task, ``KeyboardInterrupt``, a reply that
did not come in time) is cancelled by identity from a pooled connection,
until every piece sent has answered; what was granted meanwhile (the
cancel's ``granted``, a piece's grant) is told to the caller, which
gives it back: no grant is left that nobody holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis import exceptions as rex

from .. import _protocol
from .._holds import monotonic
from ..errors import TRANSPORT
from . import _io

# How often a given-up wait is cancelled again while a piece sent is
# still unanswered (it was on its way when the cancel ran), and how many
# times: after that its connection is closed, and fenced by the caller.
_RECANCEL = 0.05
_ROUNDS = 20


@dataclass(eq=False)
class Wait:
    """One identity's (a lock owner's, a waiter id's) wait on ``name``:
    ``make(ms)`` is a piece's command, ``final(reply)`` whether a reply
    ends the wait (a grant, a latch's end)."""

    counted: Any
    node: Any
    name: str
    who: str
    make: Callable[[int], list[Any]]
    final: Callable[[Any], bool]
    # (connection, its id, when its piece was sent): pieces unanswered,
    # oldest first; connections read clean; ids of those closed with a
    # piece unanswered (to fence with CLIENT KILL before a read-back).
    out: list[tuple[Any, int | None, float]] = field(default_factory=list)
    free: list[tuple[Any, int | None]] = field(default_factory=list)
    broken: list[int | None] = field(default_factory=list)
    crossed: bool = False  # a piece crossed its predecessor's grant
    sent_at: float = 0.0  # when the piece last answered was sent

    async def run(self, deadline: float | None, margin: float) -> Any:
        """The reply that ended the wait, or the last piece's (timed out)
        at ``deadline`` (None: never), each awaited ``margin`` longer."""
        piece = self.counted.options.wait_piece
        cancels = _io.cancels()
        while True:
            left = math.inf if deadline is None else max(deadline - monotonic(), 0.0)
            last = left <= piece
            conn, cid = self.free.pop() if self.free else await self.counted.checkout(self.node)
            self.out.append((conn, cid, monotonic()))
            await conn.send_command(*self.make(_protocol.wait_ms(min(left, piece))))
            _io.raise_lost_cancel(cancels)
            if len(self.out) == 2:  # the piece before is answered at once
                answer = await self.read(margin)
                if self.final(answer):
                    self.crossed = True
                    await self.read(margin)
                    return answer
            if last:
                return await self.read(left + margin)
            if await _io.arrived(conn, piece * 0.75):
                answer = await self.read(margin)
                if self.final(answer):
                    return answer

    async def read(self, within: float) -> Any:
        """The oldest unanswered piece's reply; its connection is then free
        again (dropped when it failed in transit)."""
        conn, cid, self.sent_at = self.out.pop(0)
        try:
            answer = await _io.reply(conn, within)
        except rex.ResponseError:
            self.free.append((conn, cid))
            raise
        except BaseException:
            self.broken.append(cid)
            await _io.drop(self.node, conn)
            raise
        self.free.append((conn, cid))
        return answer

    async def give_up(self) -> list[Any]:
        """Cancels the wait until every piece sent has answered, then gives
        its connections back (:meth:`close`): what the cancel and the pieces
        say was granted (their replies). A connection that fails meanwhile
        is dropped (see ``abandon``)."""
        grants: list[Any] = []
        margin = self.counted.options.wait_margin
        for _ in range(_ROUNDS):
            said = await self.counted.simple(self.name, ["LOCK.CANCEL", self.name, self.who])
            if _protocol.text(said[0]) == "granted":
                grants.append(said)
            while self.out:
                try:
                    if not await _io.arrived(self.out[0][0], _RECANCEL):
                        break
                    answer = await self.read(margin)
                    if self.final(answer):
                        grants.append(answer)
                except (rex.ResponseError, *TRANSPORT):
                    pass  # CANCELLED, or its connection failed (dropped)
            if not self.out:
                break
        await self.close()
        return grants

    async def close(self) -> None:
        """The connections back to the pool; those with a piece unanswered
        closed (their ids kept in ``broken``: to fence)."""
        while self.free:
            await _io.put(self.node, self.free.pop()[0])
        while self.out:
            conn, cid, _ = self.out.pop()
            self.broken.append(cid)
            await _io.drop(self.node, conn)
