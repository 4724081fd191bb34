"""Generated from ``_async/waiting.py`` by ``scripts/unasync.py``: do not edit."""

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

_RECANCEL = 0.05
_ROUNDS = 20


@dataclass(eq=False)
class Wait:
    counted: Any
    node: Any
    name: str
    who: str
    make: Callable[[int], list[Any]]
    final: Callable[[Any], bool]
    out: list[tuple[Any, int | None, float]] = field(default_factory=list)
    free: list[tuple[Any, int | None]] = field(default_factory=list)
    broken: list[int | None] = field(default_factory=list)
    crossed: bool = False  # a piece crossed its predecessor's grant
    sent_at: float = 0.0  # when the piece last answered was sent

    def run(self, deadline: float | None, margin: float) -> Any:
        piece = self.counted.options.wait_piece
        cancels = _io.cancels()
        while True:
            left = math.inf if deadline is None else max(deadline - monotonic(), 0.0)
            last = left <= piece
            conn, cid = self.free.pop() if self.free else self.counted.checkout(self.node)
            self.out.append((conn, cid, monotonic()))
            conn.send_command(*self.make(_protocol.wait_ms(min(left, piece))))
            _io.raise_lost_cancel(cancels)
            if len(self.out) == 2:  # the piece before is answered at once
                answer = self.read(margin)
                if self.final(answer):
                    self.crossed = True
                    self.read(margin)
                    return answer
            if last:
                return self.read(left + margin)
            if _io.arrived(conn, piece * 0.75):
                answer = self.read(margin)
                if self.final(answer):
                    return answer

    def read(self, within: float) -> Any:
        conn, cid, self.sent_at = self.out.pop(0)
        try:
            answer = _io.reply(conn, within)
        except rex.ResponseError:
            self.free.append((conn, cid))
            raise
        except BaseException:
            self.broken.append(cid)
            _io.drop(self.node, conn)
            raise
        self.free.append((conn, cid))
        return answer

    def give_up(self) -> list[Any]:
        grants: list[Any] = []
        margin = self.counted.options.wait_margin
        for _ in range(_ROUNDS):
            said = self.counted.simple(self.name, ["LOCK.CANCEL", self.name, self.who])
            if _protocol.text(said[0]) == "granted":
                grants.append(said)
            while self.out:
                try:
                    if not _io.arrived(self.out[0][0], _RECANCEL):
                        break
                    answer = self.read(margin)
                    if self.final(answer):
                        grants.append(answer)
                except (rex.ResponseError, *TRANSPORT):
                    pass  # CANCELLED, or its connection failed (dropped)
            if not self.out:
                break
        self.close()
        return grants

    def close(self) -> None:
        while self.free:
            _io.put(self.node, self.free.pop()[0])
        while self.out:
            conn, cid, _ = self.out.pop()
            self.broken.append(cid)
            _io.drop(self.node, conn)
