#!/usr/bin/env bash
# port-free.sh PORT: exit 0 when nothing listens on 127.0.0.1:PORT; otherwise
# say so, suggest the first port above it that nothing listens on, and exit 1.
#
# `make run` calls it before anything else, so a taken port is refused at
# once, not after `make deps` and a build. Plain bash (/dev/tcp), no other
# tool: it runs before make deps has installed anything.
set -u

port=${1:?usage: port-free.sh PORT}
case $port in
  '' | *[!0-9]*)
    echo "make run: PORT must be a number, not '$port'" >&2
    exit 1
    ;;
esac
if [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
  echo "make run: PORT must be between 1 and 65535, not $port" >&2
  exit 1
fi

# Whether something accepts connections on 127.0.0.1:$1.
listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

listening "$port" || exit 0

suggestion=
candidate=$((port + 1))
while [ "$candidate" -le 65535 ] && [ "$candidate" -le $((port + 100)) ]; do
  if ! listening "$candidate"; then
    suggestion=$candidate
    break
  fi
  candidate=$((candidate + 1))
done

echo "make run: 127.0.0.1:$port is already in use (by another redis-server?)." >&2
if [ -n "$suggestion" ]; then
  echo "make run: $suggestion is free right now: make run PORT=$suggestion" >&2
else
  echo "make run: pick a free port: make run PORT=<port>" >&2
fi
exit 1
