"""The count-down latch (Redisson's ``RCountDownLatch``)::

    latch = locks.count_down_latch("batch")
    await latch.try_set_count(3)
    ...  # three workers call latch.count_down()
    if await latch.wait_zero(timeout=10) is LatchResult.REACHED:
        ...

Its calls are ``_api.LatchApi``'s, written once for both clients.
"""

from __future__ import annotations

from typing import Any

from .._api import LatchApi
from .._protocol import LatchResult
from ._io import Later


class AsyncCountDownLatch(
    LatchApi[Later[bool], Later[int], Later[LatchResult], Later[dict[str, Any]]]
): ...
