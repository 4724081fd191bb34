"""A three-master cluster: every command routes by the lock's name."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from harness import Server, free_port
from redis_lock_client import LockClient


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[Server]]:
    buses = [free_port() for _ in range(3)]
    nodes = [
        Server(
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            str(bus),
            "--cluster-node-timeout",
            "2000",
        )
        for bus in buses
    ]
    try:
        ranges = [(0, 5460), (5461, 10922), (10923, 16383)]
        for node, (lo, hi) in zip(nodes, ranges):
            node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        for node, bus in zip(nodes[1:], buses[1:]):
            nodes[0].client().execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            infos = [n.client().execute_command("CLUSTER", "INFO") for n in nodes]
            text = [i.decode() if isinstance(i, bytes) else str(i) for i in infos]
            if all("cluster_state:ok" in t and "cluster_known_nodes:3" in t for t in text):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the cluster did not come up")
        yield nodes
    finally:
        for n in nodes:
            n.close()


def test_locks_route_by_name_and_wait_on_their_node(cluster: list[Server]) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    locks = LockClient(rc)
    names = [f"c:{i}" for i in range(12)]
    guards = [locks.lock(n) for n in names]
    homes = set()
    for n, g in zip(names, guards):
        node = rc.get_node_from_key(n)
        homes.add(node.port)
        assert redis.Redis(port=node.port).hget(n, g.owner) == b"1"
    assert len(homes) == 3  # the names spread over every master
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(locks.try_lock(names[0], 5.0)))
    t.start()
    time.sleep(0.1)
    assert not got  # another thread of the same client waits
    guards[0].unlock()
    t.join()
    assert got[0] is not None
    got[0].unlock()  # type: ignore[attr-defined]
    for g in guards[1:]:
        g.unlock()
    fenced = locks.lock_fenced("{c}:fenced")
    assert fenced.token is not None
    fenced.unlock()
    assert not any(rc.exists(n) for n in names)


async def test_asyncio_cluster_routes_by_name(cluster: list[Server]) -> None:
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    from redis_lock_client import AsyncLockClient

    rc = AsyncRedisCluster(host="127.0.0.1", port=cluster[0].port)
    locks = AsyncLockClient(rc)
    names = [f"ac:{i}" for i in range(12)]
    guards = [await locks.lock(n) for n in names]
    ports = set()
    for n, g in zip(names, guards):
        port = rc.get_node_from_key(n).port
        ports.add(port)
        assert redis.Redis(port=port).hget(n, g.owner) == b"1"
    assert len(ports) == 3
    assert await locks.as_owner("other").try_lock(names[1], 0.05) is None
    for g in guards:
        await g.unlock()
    assert not any([await rc.exists(n) for n in names])
    await rc.aclose()
