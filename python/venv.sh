#!/usr/bin/env bash
# Creates .cache/py-venv (untracked) for the Python client: its tests, lint
# and bench need python/requirements-dev.txt and the package itself
# (editable). Idempotent: reinstalls only when the requirements or
# pyproject.toml changed. Run by `make deps`.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.cache/py-venv
stamp=$venv/.installed

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p .cache
    if ! python3 -m venv "$venv" 2>/dev/null; then
        # Debian's python3 ships venv/ensurepip in a separate package.
        rm -rf "$venv"
        sudo=; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
        $sudo apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
        python3 -m venv "$venv"
    fi
fi
want=$(cat python/requirements-dev.txt python/pyproject.toml | sha256sum)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        -r python/requirements-dev.txt -e python
    echo "$want" > "$stamp"
fi
