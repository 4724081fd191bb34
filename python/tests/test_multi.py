"""MultiLock over three servers and RedLock over five."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness import Server
from redis_lock_client import LockClient, MultiLock, RedLock


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Server]]:
    s = [Server() for _ in range(5)]
    yield s
    for x in s:
        x.close()


def test_multilock_takes_all_or_rolls_back(servers: list[Server]) -> None:
    clients = [LockClient(s.client()) for s in servers[:3]]
    multi = MultiLock([(clients[0], "m:a"), (clients[1], "m:b"), (clients[2], "m:c")])
    other = clients[2].as_owner("other").lock("m:c")
    assert multi.try_lock(0.2) is None
    for s, name in zip(servers[:2], ["m:a", "m:b"]):
        assert not s.client().exists(name)  # rolled back
    other.unlock()
    with multi.try_lock(1.0, lease=5) as g:  # type: ignore[union-attr]
        assert len(g.guards) == 3
        for s, name in zip(servers[:3], ["m:a", "m:b", "m:c"]):
            assert 4000 < s.client().pttl(name) <= 5000
    for s, name in zip(servers[:3], ["m:a", "m:b", "m:c"]):
        assert not s.client().exists(name)
    g2 = multi.lock()
    g2.unlock()


def test_redlock_survives_a_minority_and_fails_without_a_quorum(
    servers: list[Server],
) -> None:
    clients = [
        LockClient(s.client(socket_connect_timeout=0.2), command_timeout=0.2, retries=0)
        for s in servers
    ]
    red = RedLock(clients, "m:red")
    assert red.quorum == 3
    g = red.try_lock(1.0, 5.0)
    assert g is not None and 0 < g.validity() <= 5.0
    assert RedLock(clients, "m:red").try_lock(0.1, 5.0) is None
    g.unlock()
    assert not any(s.client().exists("m:red") for s in servers)
    servers[0].stop()
    servers[1].stop()
    g = red.try_lock(1.0, 5.0)
    assert g is not None
    g.unlock()
    servers[2].stop()
    assert red.try_lock(0.3, 5.0) is None


async def test_asyncio_multilock_and_redlock(servers: list[Server]) -> None:
    import redis.asyncio as aredis

    from redis_lock_client import AsyncLockClient, AsyncMultiLock, AsyncRedLock

    live = [s for s in servers if s.proc is not None and s.proc.poll() is None]
    assert len(live) >= 2
    clients = [AsyncLockClient(aredis.Redis(port=s.port)) for s in live[:2]]
    multi = AsyncMultiLock([(clients[0], "am:a"), (clients[1], "am:b")])
    other = await clients[1].as_owner("other").lock("am:b")
    assert await multi.try_lock(0.1) is None
    assert not live[0].client().exists("am:a")  # rolled back
    await other.unlock()
    guard = await multi.try_lock(1.0, lease=5)
    assert guard is not None
    async with guard:
        assert all(s.client().exists(n) for s, n in zip(live[:2], ["am:a", "am:b"]))
    assert not any(s.client().exists(n) for s, n in zip(live[:2], ["am:a", "am:b"]))
    red = AsyncRedLock(clients, "am:red")
    assert red.quorum == 2
    async with await red.try_lock(1.0, 5.0) as g:  # type: ignore[union-attr]
        assert 0 < g.validity() <= 5.0
        assert await AsyncRedLock(clients, "am:red").try_lock(0.05, 5.0) is None
    assert not any(s.client().exists("am:red") for s in live[:2])
