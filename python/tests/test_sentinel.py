"""A Sentinel-managed master: the client follows a failover."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
from redis.sentinel import Sentinel

from harness import SERVER, Server, free_port, wait_until
from redis_lock_client import LockClient


def start_sentinel(master_port: int, workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    conf = Path(workdir, f"sentinel-{port}.conf")
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor mymaster 127.0.0.1 {master_port} 1\n"
        "sentinel down-after-milliseconds mymaster 500\n"
        "sentinel failover-timeout mymaster 3000\n"
    )
    proc = subprocess.Popen(
        [SERVER, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    s = redis.Redis(port=port)
    assert wait_until(lambda: _answers(s), 10)
    return proc, port


def _answers(s: redis.Redis) -> bool:
    try:
        return bool(s.ping())
    except redis.exceptions.ConnectionError:
        return False


def test_a_lock_survives_a_failover_and_the_watchdog_renews_on_the_new_master() -> None:
    master = Server("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
    replica = Server("--replicaof", "127.0.0.1", str(master.port))
    sentinel, port = start_sentinel(master.port, master.dir)
    try:
        assert wait_until(
            lambda: replica.client().info("replication").get("master_link_status") == "up", 10
        )
        sentinels = Sentinel([("127.0.0.1", port)], socket_timeout=0.5)
        assert wait_until(lambda: len(sentinels.discover_slaves("mymaster")) == 1, 10)
        r = sentinels.master_for("mymaster", socket_timeout=0.5, socket_connect_timeout=0.5)
        locks = LockClient(r, watchdog_lease=6.0, retries=100, retry_interval=0.1)
        g = locks.lock("s:lock")
        assert master.client().hget("s:lock", g.owner) == b"1"
        assert wait_until(lambda: replica.client().hget("s:lock", g.owner) == b"1", 5)
        master.stop()  # the master dies; Sentinel promotes the replica
        assert wait_until(lambda: replica.client().info("replication").get("role") == "master", 15)
        time.sleep(2.5)  # past a renewal on the new master
        assert not g.lost.is_set(), g.lost_reason
        assert replica.client().pttl("s:lock") > 4000  # renewed there
        g.unlock()
        assert not replica.client().exists("s:lock")
        # New locks go to the new master too.
        with locks.lock("s:other") as other:
            assert replica.client().hget("s:other", other.owner) == b"1"
    finally:
        sentinel.kill()
        sentinel.wait()
        replica.close()
        master.close()
