"""What a LOCK.SCAN listing costs, measured on a real server.

    .cache/py-venv/bin/python scripts/bench-listing.py [--objects 100000] [--count 1000]

Starts REDIS_SERVER (default redis-server) on a free loopback port with the
module (LOCK_MODULE_PATH, default target/release/libredis_lock.so), makes
`--objects` locks (a tenth by LOCK.ACQUIRE, the rest as Redisson's script
makes them: HINCRBY + PEXPIRE) and as many plain string keys, then walks a
whole listing with COUNT `--count`, and, for comparison, a plain
`SCAN ... COUNT` over the same keys. Prints, side by side: server time per
call (INFO commandstats usec_per_call, reset between the two walks, since
LOCK.SCAN's own SCAN steps count as SCAN calls), calls, and the memory the listing
keeps per object returned (INFO lock's lock_scan_listing_bytes just before
its last call, over the objects returned until then).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def usec_per_call(r: redis.Redis, command: str) -> tuple[int, float]:
    stats = r.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)), float(stats.get("usec_per_call", 0.0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    server = os.environ.get("REDIS_SERVER", "redis-server")
    module = os.environ.get(
        "LOCK_MODULE_PATH", os.path.join(root, "target/release/libredis_lock.so")
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--dir", tmp, "--loadmodule", module],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            server_info = r.info("server")
            version = server_info.get("server_name", "redis") + " " + str(
                server_info.get("valkey_version", server_info["redis_version"])
            )
            r.eval(
                "for i = 0, tonumber(ARGV[1]) - 1 do local key = 'obj:' .. i "
                "if i % 10 == 0 then redis.call('LOCK.ACQUIRE', key, 'm:' .. i, 600000) "
                "else redis.call('HINCRBY', key, 'r:' .. i, 1) "
                "redis.call('PEXPIRE', key, 600000) end "
                "redis.call('SET', 'other:' .. i, 'v') end return 1",
                0,
                args.objects,
            )
            r.config_resetstat()
            memory_before = r.info("memory")["used_memory"]
            cursor, listed, calls, kept, grown = "0", 0, 0, (0, 0), 0
            started = time.perf_counter()
            while True:
                info = r.info("lock_stats")
                kept = (int(info.get("lock_scan_listing_bytes", 0)), listed)
                grown = r.info("memory")["used_memory"] - memory_before
                cursor, objects = r.execute_command(
                    "LOCK.SCAN", cursor, "COUNT", args.count
                )
                listed += len(objects)
                calls += 1
                if cursor in (b"0", "0"):
                    break
            listing_s = time.perf_counter() - started
            lock_calls, lock_us = usec_per_call(r, "lock.scan")
            r.config_resetstat()
            raw_cursor, raw_keys = 0, 0
            started = time.perf_counter()
            while True:
                raw_cursor, keys = r.scan(raw_cursor, count=args.count)
                raw_keys += len(keys)
                if raw_cursor == 0:
                    break
            scan_s = time.perf_counter() - started
            scan_calls, scan_us = usec_per_call(r, "scan")
            bytes_kept, returned = kept
            print(f"server {version}; {args.objects} locks + {args.objects} other keys; "
                  f"COUNT {args.count}")
            print(f"| walk | calls | server time per call | whole walk (client) | returned |")
            print(f"|---|---|---|---|---|")
            print(f"| `LOCK.SCAN` | {lock_calls} | {lock_us:.0f} us | {listing_s:.2f} s "
                  f"| {listed} objects |")
            print(f"| `SCAN` | {scan_calls} | {scan_us:.0f} us | {scan_s:.2f} s "
                  f"| {raw_keys} keys |")
            per_object = bytes_kept / returned if returned else 0
            print(f"listing memory before its last call: {bytes_kept} bytes for "
                  f"{returned} objects returned = {per_object:.1f} bytes per object "
                  f"(used_memory grew {grown} bytes meanwhile = "
                  f"{grown / max(returned, 1):.1f} per object)")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
