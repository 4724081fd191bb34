"""What the threaded client does differently from the asyncio one, and
only that: its primitives (locks, events, sleeping, background threads,
owner numbers), how it talks to redis-py connections, and what happens to
an interrupted call and to a guard dropped unreleased. Every other module
of this package is generated from ``_async`` (see
``python/scripts/unasync.py``); this file is the twin of ``_async/_io.py``,
whose docstrings tell what a function does in both where that is the same.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Union

from redis import exceptions as rex
from redis.backoff import NoBackoff
from redis.retry import Retry

from .. import _protocol
from .._holds import monotonic

Lock = threading.Lock
Event = threading.Event
owner_suffix = _protocol.thread_number  # owner ids end with the thread's number


def cancels() -> int:
    """Threads are not cancelled: nothing to count."""
    return 0


def raise_lost_cancel(since: int) -> None:
    """Threads lose no cancel."""


sleep = time.sleep


def spawn(fn: Callable[..., Any], *args: Any) -> threading.Thread:
    """Runs ``fn(*args)`` in a daemon thread of its own."""
    thread = threading.Thread(target=fn, args=args, daemon=True, name="redis-lock-client")
    thread.start()
    return thread


def after_interruption(fn: Callable[..., Any], *args: Any) -> None:
    """Clean-up after an interrupted call (``KeyboardInterrupt``...): at
    once, before the exception goes on."""
    fn(*args)


def home() -> Any:
    """Where a guard's background release must run: anywhere."""
    return None


def when_dropped(_: Any, fn: Callable[..., Any], *args: Any) -> None:
    """A guard collected unreleased (from ``__del__``): ``fn(*args)`` in a
    thread of its own; at interpreter shutdown, nothing (before 3.12
    starting a thread then blocks for good): the lease ends on its own."""
    if threading.main_thread().is_alive():
        with contextlib.suppress(Exception):
            spawn(fn, *args)


class Wakeup:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def wait(self, seconds: float) -> None:
        if seconds > 0:
            self._event.wait(seconds)
        self._event.clear()


# -- connections -------------------------------------------------------------


def route(redis: Any, name: str) -> Any:
    """The ``redis.Redis`` that serves ``name``."""
    if not _protocol.is_cluster(redis):
        return redis
    node = redis.get_node_from_key(name)
    return node.redis_connection or redis.get_redis_connection(node)


def moved(redis: Any) -> None:
    manager = getattr(redis, "nodes_manager", None)
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.initialize()


def put(node: Any, conn: Any) -> None:
    node.connection_pool.release(conn)


def drop(node: Any, conn: Any) -> None:
    try:
        conn.disconnect()
    finally:
        put(node, conn)


def socket(conn: Any) -> Any:
    return getattr(conn, "_sock", None)


def arrived(conn: Any, within: float) -> bool:
    """Whether the reply to what was sent came within ``within`` s, left
    for :func:`reply` (polled a second at a time: interruptible)."""
    limit = monotonic() + within
    while not conn.can_read(max(0.0, min(1.0, limit - monotonic()))):
        if monotonic() >= limit:
            return False
    return True


def reply(conn: Any, within: float | None) -> Any:
    """The reply to what was sent, awaited ``within`` s (None: forever),
    polled a second at a time so the thread stays interruptible
    (``KeyboardInterrupt``); a wait without end relies on TCP keep-alive to
    notice a vanished server."""
    if not arrived(conn, math.inf if within is None else within):
        raise rex.TimeoutError(f"no reply within {within:.3f} s")
    return conn.read_response()


def execute(conn: Any, args: list[Any], timeout: float | None) -> Any:
    conn.send_command(*args)
    own = conn.socket_timeout
    if own is None or (timeout is not None and timeout < own):
        # The socket would wait longer than allowed: poll first.
        limit = _protocol.short_timeout(timeout)
        if not conn.can_read(limit):
            raise rex.TimeoutError(f"no reply to {args[0]} within {limit:.3f} s")
    return conn.read_response()


# -- the tracking connection pair ---------------------------------------------


def new_connection(redis: Any, **overrides: Any) -> Any:
    pool = redis.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0), **overrides}
    return pool.connection_class(**kwargs)


def close(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.disconnect()


def message(conn: Any, within: float) -> Any:
    return conn.read_response() if conn.can_read(within) else None


def try_hold(lock: Any) -> bool:
    return bool(lock.acquire(blocking=False))


def at_once(calls: Sequence[Callable[[], Any]], within: float) -> list[Any]:
    """Runs every call at once (a thread each), waiting ``within`` s at
    most: their results, None for one that failed or was too slow (it runs
    on, left behind)."""
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        with contextlib.suppress(Exception):
            results[i] = call()

    threads = [spawn(run, i, call) for i, call in enumerate(calls)]
    deadline = monotonic() + within
    for thread in threads:
        thread.join(max(0.0, deadline - monotonic()))
    return list(results)


T = TypeVar("T")
# What a call of the shared API (``_api.py``) returns here: the value itself.
if TYPE_CHECKING:
    Later = Union[T]  # noqa: UP007 - an alias of T that takes a parameter
else:

    class Later:
        def __class_getitem__(cls, item: Any) -> Any:
            return item
