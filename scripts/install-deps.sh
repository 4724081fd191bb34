#!/usr/bin/env bash
# Install what building, testing and `make servers` need, and only what is
# missing (`make deps`; `make build`, `make test` and `make run` call it):
#
#   Rust (cargo, rustc) >= Cargo.toml's rust-version  rustup, see below
#   a C compiler and linker (cc)                      gcc, libc6-dev
#   libclang, for bindgen at build time               libclang-dev
#   redis-server, redis-cli, redis-benchmark          redis-server, redis-tools (Debian's 7.0.15)
#   python3 with pip (make servers, make bench)       python3, python3-pip
#   CA certificates (cargo and pip over TLS)          ca-certificates
#   kill(1), which the tests run to stop servers      procps (minimal images lack it)
#   a JDK >= 17 and Maven (the Java library, java/)   openjdk-17-jdk-headless, maven
#
# Rust, when cargo is missing or its rustc is older than Cargo.toml's
# rust-version (cargo is looked for on PATH and in ~/.cargo/bin, where rustup
# puts it; the Makefile adds that directory to PATH):
#   1. an existing rustup installs the stable toolchain;
#   2. else Debian's `rustup` package, where the release has one (trixie and
#      later), then the stable toolchain;
#   3. else the official rustup-init script, for this user (~/.cargo, ~/.rustup;
#      shell profiles are left alone);
#   4. if that download fails: Debian's cargo-web/rustc-web packages, when the
#      apt sources offer a new enough one (bookworm-security has 1.96; plain
#      bookworm has 1.85, too old).
# RUST_FROM=rustup stops after step 3; RUST_FROM=debian skips straight to 4.
#
# Without apt-get it only checks and reports what is missing. Runs
# `apt-get update` only when something has to be installed; uses sudo only
# when not root (rustup always runs as the calling user). Never leaves the
# Debian redis-server service running.
set -euo pipefail
cd "$(dirname "$0")/.."

rust_from=${RUST_FROM:-auto}
case $rust_from in auto | rustup | debian) ;; *)
  echo "deps: RUST_FROM must be auto, rustup or debian, not '$rust_from'" >&2
  exit 2
  ;;
esac

msrv=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml)
[[ -n $msrv ]] || { echo "deps: no rust-version in Cargo.toml" >&2; exit 1; }
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
caller_path=$PATH
export PATH="$cargo_bin:$PATH" # as the Makefile does

# version_ge A B: A >= B, dotted versions.
version_ge() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1) == "$2" ]]; }

# The rustc that cargo on PATH would use: "1.95.0", or "" when there is none.
rustc_version() {
  command -v cargo >/dev/null || return 0
  rustc --version 2>/dev/null | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p'
}

rust_ok() {
  local v
  v=$(rustc_version)
  [[ -n $v ]] && version_ge "$v" "$msrv"
}

describe_rust() {
  local v
  v=$(rustc_version)
  if [[ -z $v ]]; then
    echo "Rust: no working cargo/rustc on PATH or in $cargo_bin"
  else
    echo "Rust: rustc $v at $(command -v rustc) is older than rust-version $msrv (Cargo.toml)"
  fi
}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# libclang for bindgen: Debian's libclang-dev where dpkg exists, else any
# libclang the loader or LIBCLANG_PATH knows.
libclang_ok() {
  if command -v dpkg-query >/dev/null; then
    have_pkg libclang-dev
  else
    [[ -n ${LIBCLANG_PATH:-} ]] || { command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'; }
  fi
}

missing=() # apt packages
why=()     # what each missing piece is, for the report
need() { missing+=("$@"); }
command -v cc >/dev/null || { need gcc libc6-dev; why+=("a C compiler and linker (cc)"); }
libclang_ok || { need libclang-dev; why+=("libclang (bindgen)"); }
command -v redis-server >/dev/null || { need redis-server; why+=("redis-server"); }
{ command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null; } ||
  { need redis-tools; why+=("redis-cli, redis-benchmark"); }
if ! command -v python3 >/dev/null; then
  need python3 python3-pip
  why+=("python3 with pip")
elif ! python3 -m pip --version >/dev/null 2>&1; then
  need python3-pip
  why+=("pip for python3 (make servers)")
fi
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || { need ca-certificates; why+=("CA certificates"); }
# The shell's builtin kill does not count: the tests run the kill program.
type -P kill >/dev/null || { need procps; why+=("the kill program (the tests run it)"); }
# The Java library's build and tests: javac >= 17 (the tests' release), Maven.
javac_major=$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')
[[ -n $javac_major && $javac_major -ge 17 ]] || { need openjdk-17-jdk-headless; why+=("a JDK >= 17 (javac)"); }
command -v mvn >/dev/null || { need maven; why+=("Maven (mvn)"); }
need_rust=
rust_ok || { need_rust=1; why+=("$(describe_rust)"); }

if [[ ${#why[@]} -eq 0 ]]; then
  echo "deps: all present: rustc $(rustc_version) (>= $msrv), cc, libclang, redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\) .*/\1/p'), redis-cli, redis-benchmark, python3 with pip, kill, javac $javac_major, mvn"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "deps: no apt-get here, so nothing is installed. Missing:" >&2
  printf '  - %s\n' "${why[@]}" >&2
  if [[ -n $need_rust ]]; then
    echo "  Rust: install rustup (https://rustup.rs), then: rustup toolchain install stable" >&2
  fi
  exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    echo "deps: not root and no sudo: cannot install. Missing:" >&2
    printf '  - %s\n' "${why[@]}" >&2
    exit 1
  }
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
apt_updated=
apt_update() {
  [[ -n $apt_updated ]] && return
  "${sudo[@]}" apt-get update
  apt_updated=1
}
apt_install() {
  apt_update
  "${sudo[@]}" apt-get install -y --no-install-recommends "$@"
}
# The version apt would install, or "" when no source has the package.
apt_candidate() {
  apt_update >/dev/null
  apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *\([^ (]*\).*/\1/p' | grep -v '^$' | grep -vx 'none' || true
}

# The redis-server package starts its service on 127.0.0.1:6379 when it can
# (init script or systemd unit), which would block `make run`. A policy-rc.d
# that answers 101 ("action forbidden") stops invoke-rc.d and deb-systemd-invoke
# from starting it. Docker-style images already ship one; otherwise add one
# for the length of the install.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 0755 "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

echo "deps: missing:"
printf '  - %s\n' "${why[@]}"
# rustup-init needs curl; cargo needs the CA certificates either way.
if [[ -n $need_rust && $rust_from != debian ]]; then
  command -v curl >/dev/null || need curl
  [[ -e /etc/ssl/certs/ca-certificates.crt ]] || need ca-certificates
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
  echo "deps: apt-get install ${missing[*]}"
  apt_install "${missing[@]}"
fi

[[ -z $need_rust ]] && exit 0

rustup_toolchain() {
  rustup toolchain install stable --profile minimal --component clippy,rustfmt &&
    rustup default stable
}

# Steps 1-3 of the header; fails when the toolchain could not be downloaded.
rust_via_rustup() {
  if command -v rustup >/dev/null; then
    echo "deps: rustup is installed: installing the stable toolchain"
    rustup_toolchain
    return
  fi
  if [[ -n $(apt_candidate rustup) ]]; then
    echo "deps: installing Debian's rustup package, then the stable toolchain"
    apt_install rustup && rustup_toolchain
    return
  fi
  echo "deps: installing Rust with the official rustup-init script into ${CARGO_HOME:-$HOME/.cargo}"
  local tmp status=0
  tmp=$(mktemp -d)
  if curl --proto '=https' --tlsv1.2 -sSf --connect-timeout 30 --retry 2 \
    https://sh.rustup.rs -o "$tmp/rustup-init.sh"; then
    sh "$tmp/rustup-init.sh" -y --no-modify-path --profile minimal \
      --default-toolchain stable --component clippy,rustfmt || status=$?
  else
    status=$?
    echo "deps: could not download rustup-init (curl exit $status)" >&2
  fi
  rm -rf "$tmp"
  return "$status"
}

# Step 4: Debian's own newer Rust, if the apt sources have a new enough one.
rust_via_debian() {
  local v
  v=$(apt_candidate cargo-web)
  v=${v%%+*}
  if [[ -z $v ]] || ! version_ge "$v" "$msrv"; then
    echo "deps: Debian's cargo-web is ${v:-not available} here, older than $msrv: add bookworm-security to the apt sources (deb http://deb.debian.org/debian-security bookworm-security main) and run make deps again" >&2
    return 1
  fi
  echo "deps: installing Debian's cargo-web/rustc-web $v"
  apt_install cargo-web rustc-web rustfmt-web rust-web-clippy
}

done_rust=
if [[ $rust_from != debian ]]; then
  if rust_via_rustup && rust_ok; then
    done_rust=1
  elif [[ $rust_from == rustup ]]; then
    echo "deps: rustup could not install Rust (RUST_FROM=rustup: no other way tried)" >&2
    exit 1
  else
    echo "deps: rustup could not install Rust; trying Debian's cargo-web" >&2
  fi
fi
if [[ -z $done_rust ]]; then
  rust_via_debian && rust_ok && done_rust=1
fi
if [[ -z $done_rust ]]; then
  echo "deps: no Rust >= $msrv installed. $(describe_rust)" >&2
  exit 1
fi
echo "deps: $(cargo --version) at $(command -v cargo)"
if [[ $(command -v cargo) == "$cargo_bin"/* && :$caller_path: != *":$cargo_bin:"* ]]; then
  echo "deps: make finds it; for your shell, add $cargo_bin to PATH (. \"${CARGO_HOME:-\$HOME/.cargo}/env\")"
fi
