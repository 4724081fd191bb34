from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from harness import Proxy, Server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def fresh_server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    p = Proxy(server.port)
    yield p
    p.close()
