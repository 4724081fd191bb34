#!/usr/bin/env bash
# Install what building and testing need, and only what is missing:
#   redis-server, redis-tools (redis-cli, redis-benchmark)  Debian's Redis 7.0.15
#   libclang-dev                                            for bindgen at build time
# Runs `apt-get update` only when something has to be installed. Uses sudo
# only when not root. Never leaves the Debian redis-server service running.
set -euo pipefail

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
{ command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null; } || missing+=(redis-tools)
dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q 'install ok installed' || missing+=(libclang-dev)

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: redis-server, redis-cli, redis-benchmark and libclang-dev already installed"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "deps: missing ${missing[*]} and no apt-get here: install them by hand" >&2
  exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: not root and no sudo: cannot install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

# The redis-server package starts its service on 127.0.0.1:6379 when it can
# (init script or systemd unit), which would block `make run`. A policy-rc.d
# that answers 101 ("action forbidden") stops invoke-rc.d and deb-systemd-invoke
# from starting it. Docker-style images already ship one; otherwise add one
# for the length of the install.
policy=/usr/sbin/policy-rc.d
added_policy=
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 0755 "$policy"
  added_policy=1
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"

if [[ -n $added_policy ]]; then
  "${sudo[@]}" rm -f "$policy"
  trap - EXIT
fi
