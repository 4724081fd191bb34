"""Generated from ``_async/latch.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from .._api import LatchApi
from .._protocol import LatchResult
from ._io import Later


class CountDownLatch(
    LatchApi[Later[bool], Later[int], Later[LatchResult], Later[dict[str, Any]]]
): ...
