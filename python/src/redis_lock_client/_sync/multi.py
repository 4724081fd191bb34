"""Generated from ``_async/multi.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import contextlib
import functools
import random

from .. import _protocol
from .._api import MultiHeld, MultiParts, RedLockPlan, RedLockView
from .._holds import monotonic
from .._protocol import Number
from ..errors import LockError
from . import _io
from ._io import Later
from .client import LockClient
from .guard import LockGuard, Releasing


def _roll_back(held: list[LockGuard]) -> None:
    with contextlib.suppress(LockError):
        MultiGuard(held[::-1]).unlock()


class MultiGuard(MultiHeld, Releasing):
    """The locks of an :class:`MultiLock`, released together (at the
    end of a ``with`` block: the first error, unless the block raised)."""

    _released = False
    _quiet = LockError

    def unlock(self) -> None:
        """Releases every lock (all are attempted); raises the first error."""
        first: LockError | None = None
        for guard in self.guards:
            try:
                guard.unlock()
            except LockError as e:
                first = first or e
        if first is not None:
            raise first

    _give_back = unlock


class MultiLock(MultiParts[Later[MultiGuard], Later[MultiGuard | None]]):
    def _acquire(self, wait: float | None, lease: Number | None) -> MultiGuard | None:
        deadline = None if wait is None else monotonic() + wait
        held: list[LockGuard] = []
        try:
            for client, name in self._parts:
                part_wait = None if deadline is None else max(0.0, deadline - monotonic())
                guard = client.try_lock(name, part_wait, lease)
                if guard is None:
                    _roll_back(held)
                    return None
                held.append(guard)
            if lease is not None and len(held) > 1:
                for guard in held:
                    if not guard.renew(lease):
                        _roll_back(held)
                        return None
        except BaseException:
            _roll_back(held)
            raise
        return MultiGuard(held)


class RedLock(RedLockPlan):
    def try_lock(self, wait: Number, lease: Number) -> RedLockGuard | None:
        """The lock on a quorum within ``wait`` s for ``lease`` s, or None."""
        ms = _protocol.lease_ms(lease)
        lease = float(lease)
        budget_end = monotonic() + float(wait)
        per_master = min(max(lease / 10, 0.005), self._timeout())
        drift = lease / 100 + 0.002
        while True:
            owner = self._round()
            started = monotonic()
            args = ["LOCK.ACQUIRE", self.name, owner, ms]

            def attempt(master: LockClient, args: list[object] = args) -> bool:
                return master.send(self.name, args, per_master, retries=0) is None

            calls = [functools.partial(attempt, m) for m in self._masters]
            granted = (_io.at_once(calls, per_master)).count(True)
            validity = lease - (monotonic() - started) - drift
            guard = RedLockGuard(self._masters, self.name, owner, started + validity)
            if granted >= self.quorum and validity > 0:
                return guard
            guard.unlock()
            left = budget_end - monotonic()
            if left <= 0:
                return None
            _io.sleep(min(left, random.uniform(0.01, 0.05)))


class RedLockGuard(RedLockView, Releasing):
    def unlock(self) -> None:
        """Releases it on every master, reachable or not (errors ignored: an
        unreachable master's hold ends with its lease)."""
        args = ["LOCK.RELEASE", self.name, self.owner]
        calls = [functools.partial(m.send, self.name, args, retries=0) for m in self._masters]
        _io.at_once(calls, self._timeout())

    _released = False
    _give_back = unlock
