"""The guard of one hold of a lock (or a read-write lock's read or write
hold): its calls are ``_api.HoldView``'s, but for giving it back."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .._api import HoldView
from ..errors import NotHeld
from ._io import Event, Later

S = TypeVar("S", bound="Releasing")


class Releasing:
    """``async with`` for a guard: the hold goes back when the block ends;
    one found gone raises :class:`NotHeld` (``_quiet``) unless the block
    raised."""

    _released: bool
    _give_back: Callable[[], Any]  # the guard's unlock or release
    _quiet: type[Exception] = NotHeld

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._released:
            return
        try:
            await self._give_back()
        except self._quiet:
            if et is None:
                raise


class AsyncLockGuard(HoldView[Event, Later[bool], Later[float | None]], Releasing):
    async def unlock(self) -> None:
        """Gives this hold back; :class:`NotHeld` if the lock was lost."""
        if self._released:
            raise NotHeld(self.name)
        self._released = True
        await self._engine.release(self._entry)

    _give_back = unlock
