#!/usr/bin/env bash
# make dist: one release archive per target, in target/dist/:
#
#   redis-lock-v<version>-<target>.tar.gz          the archive
#   redis-lock-v<version>-<target>.tar.gz.sha256   its SHA-256
#
# holding, under redis-lock-v<version>-<target>/: libredis_lock.so,
# redis.conf.example, LICENSE, README.md (an excerpt of the repository's,
# with the version, commit, target and the glibc it needs), lock-info.lua
# (INFO lock for redis_exporter) and SHA256SUMS of those files.
#
# The version is the workspace's (Cargo.toml's [workspace.package]), the
# one MODULE LIST shows. Targets: DIST_TARGETS (default: this machine's,
# x86_64-unknown-linux-gnu here). Another target needs its Rust standard
# library (rustup target add), a C toolchain and libclang able to compile
# for it (the redis-module crate runs bindgen and cc): aarch64-unknown-linux-gnu
# needs gcc-aarch64-linux-gnu and CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER;
# x86_64-unknown-linux-musl (alpine images) needs musl-tools and
# RUSTFLAGS="-C target-feature=-crt-static" (a cdylib cannot be static).
# Neither is installed on our machines, so only the host target is built
# and tested here.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
[[ -n $version ]] || { echo "dist: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
host=$(rustc -vV | sed -n 's/^host: //p')
targets=${DIST_TARGETS:-$host}
out=target/dist
mkdir -p "$out"

# The commit the build embeds (build.rs: REDIS_LOCK_COMMIT, else git).
commit=${REDIS_LOCK_COMMIT:-}
if [[ -z $commit ]]; then
  top=$(git rev-parse --show-toplevel 2>/dev/null || true)
  if [[ -n $top && $(cd "$top" && pwd -P) == $(pwd -P) ]]; then
    commit=$(git rev-parse --short=12 HEAD)
  else
    commit=unknown
  fi
fi
# Archive members get the commit's date, not today's.
mtime=$(git log -1 --format=%ct 2>/dev/null || date +%s)

# A README for the archive: what it is (the repository README's opening
# paragraphs), then how to check and load this build.
readme_excerpt() {
  local target=$1 glibc=$2
  echo "# redis-lock $version for $target"
  # (minus links to the README's own sections, which the archive lacks)
  sed -n '/^# redis-lock/,/^## The objects/p' README.md | sed '1d;$d' |
    sed -E 's/ \(\[[^]]*\]\(#[^)]*\)\)//g'
  cat <<EOF
## This archive

Built from commit $commit, for $target: it needs glibc $glibc or
later (Debian 12, Ubuntu 22.04, RHEL 9 and newer, and the official redis
and valkey Debian-based images), and does not load into an alpine (musl)
image. It needs a server with the Redis 7 module API: Redis 7.0 or later,
or Valkey (tested on Redis 7.0.15, Redis 8.2.3 and Valkey 9.1.2); an older
server refuses it with a log line naming the minimum.

Check the files, then add one line to the server's redis.conf (the path
must be absolute) and restart it:

    sha256sum -c SHA256SUMS
    loadmodule /absolute/path/to/libredis_lock.so

Load it on every node that may become master. The server log then says
"lock module: version $version (commit $commit) loaded on ...", and
MODULE LIST shows the module as "lock". redis.conf.example has every
lock.* config, commented; lock-info.lua exports INFO lock to Prometheus
through redis_exporter (redis_exporter --script lock-info.lua). The full
documentation is in the source repository's docs/ folder:
docs/operations.md for running it.
EOF
}

for target in $targets; do
  if [[ $target == "$host" ]]; then
    cargo build --release --lib
    so=target/release/libredis_lock.so
  else
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
      echo "dist: target $target is not installed (rustup target add $target; see the" \
        "header of scripts/dist.sh for the C toolchain it needs)" >&2
      exit 1
    fi
    cargo build --release --lib --target "$target"
    so=target/$target/release/libredis_lock.so
  fi
  glibc=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  name=redis-lock-v$version-$target
  stage=$out/$name
  rm -rf "$stage" "$out/$name.tar.gz" "$out/$name.tar.gz.sha256"
  mkdir -p "$stage"
  install -m 0755 "$so" "$stage/libredis_lock.so"
  install -m 0644 redis.conf.example LICENSE contrib/redis_exporter/lock-info.lua "$stage/"
  readme_excerpt "$target" "${glibc:-unknown}" >"$stage/README.md"
  (cd "$stage" && sha256sum libredis_lock.so redis.conf.example LICENSE README.md lock-info.lua >SHA256SUMS)
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
    -czf "$out/$name.tar.gz" -C "$out" "$name"
  (cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
  rm -rf "$stage"
  echo "$out/$name.tar.gz"
done
