#!/usr/bin/env bash
# Where the acquires' server-side cost goes, in instructions (deterministic,
# unlike wall-clock usec_per_call on a shared machine).
#
# Runs redis-server under callgrind collecting only inside Redis's call(),
# sends N commands, and prints instructions per call for SET NX PX,
# LOCK.ACQUIRE and Redisson's acquire script (EVALSHA of tryLockInnerAsync),
# LOCK.ACQUIRE ... TOKEN (a fencing token: the counter key written too) and
# Redisson RFencedLock's script, LOCK.RACQUIRE / LOCK.WACQUIRE and
# Redisson's read and write lock scripts, on fresh keys (every call takes a
# free lock / sets a new key) and, for the locks, re-entering one key; then
# LOCK.SEMACQUIRE and LOCK.PERMITACQUIRE ... LEASE on one semaphore with
# permits to spare; plus the share of LOCK.ACQUIRE spent in
# RedisModule_Replicate (RM_Replicate; VM_Replicate in Valkey), which
# propagates the RESTORE (formerly HSET + PEXPIREAT) effects to replicas and the AOF; then
# (TAX=yes, the default) what loading the module costs INCR, SET and HSET on
# other keys (without the module, with it and nothing waited, with it after
# one waiter of each kind).
#
# Re-entering one key is the one figure that depends on timing: a re-entry
# in the millisecond of the grant before it keeps the deadline, which is
# then neither rewritten nor replicated, and under valgrind fewer calls fall
# in one millisecond than at full speed.
#
# With BEFORE set to another build of the module (say, main's), the plain and
# fenced acquires are profiled with it too, in the same run, for a
# before/after table.
#
# With BASELINE_MODULE=<another build's .so>, it prints only a comparison
# of the two builds instead: LOCK.ACQUIRE on fresh keys and re-entering one
# key, LOCK.ACQUIRE ... TOKEN, and a cycle of LOCK.ACQUIRE + LOCK.RELEASE
# (one pipeline of both, so every acquire takes a free lock and every
# release frees it), per build, side by side.
#
# With KEEP_OUT=<dir>, every profile's callgrind output is kept there
# (<label>.out), for `callgrind_annotate --inclusive=yes <dir>/acquire.out`:
# which functions of Redis and of the module the instructions go to.
#
# Environment: REDIS_SERVER (default redis-server), LOCK_MODULE_PATH, N
# (20000), TAX (yes), BEFORE (none), BASELINE_MODULE (none), KEEP_OUT (none).
set -euo pipefail
cd "$(dirname "$0")/.."
server=${REDIS_SERVER:-redis-server}
module=$(realpath -m "${LOCK_MODULE_PATH:-target/release/libredis_lock.so}")
n=${N:-20000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[[ -f $module ]] || { echo "error: no module at $module (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
keep_out=${KEEP_OUT:+$(realpath -m "$KEEP_OUT")}
[[ -z $keep_out ]] || mkdir -p "$keep_out"
trap '[[ -z $keep_out ]] || cp "$tmp"/*.out "$keep_out"/ 2>/dev/null; rm -rf "$tmp"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# profile <label> <command...>: prints "<instructions per call> <RM_Replicate instructions per call>"
# With load=none the server runs without the module; with setup=waits, one
# client of each kind waits for a lock object (and times out) first.
profile() {
  local label=$1; shift
  local port; port=$(free_port)
  local calls=$n
  local load=(--loadmodule "${profile_module:-$module}")
  [[ ${load_module:-yes} == no ]] && load=()
  valgrind --tool=callgrind --toggle-collect=call --callgrind-out-file="$tmp/$label.out" \
    "$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$tmp" \
    "${load[@]}" >"$tmp/$label.log" 2>&1 &
  local pid=$!
  for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [[ ${setup:-} == semaphore ]]; then # permits to spare, on one key
    redis-cli -p "$port" LOCK.SEMSET sem 1000000000 >/dev/null
  fi
  if [[ ${setup:-} == waits ]]; then # counted too, but 8 calls among $n
    local cli=(redis-cli -p "$port")
    "${cli[@]}" LOCK.ACQUIRE tax:lock holder 60000 >/dev/null
    "${cli[@]}" LOCK.ACQUIRE tax:lock waiter 60000 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.WACQUIRE tax:rw writer 60000 >/dev/null
    "${cli[@]}" LOCK.RACQUIRE tax:rw reader 60000 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.SEMSET tax:sem 0 >/dev/null
    "${cli[@]}" LOCK.SEMACQUIRE tax:sem 1 WAIT 10 >/dev/null
    "${cli[@]}" LOCK.LATCHSET tax:latch 1 >/dev/null
    "${cli[@]}" LOCK.AWAIT tax:latch 10 >/dev/null
    sleep 0.5
  fi
  if [[ $1 == EVALSHA ]]; then # the script is loaded outside call()'s count
    local sha; sha=$(redis-cli -p "$port" SCRIPT LOAD "${eval_script:-$script}")
    set -- EVALSHA "$sha" "${@:2}"
  fi
  if [[ $1 == CYCLE ]]; then # 2n commands from a file, n pairs
    redis-cli -p "$port" --pipe <"$cycle_file" >/dev/null
    calls=$((2 * n))
  else
    redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -c 1 -n "$n" -r 100000000 -q "$@" >/dev/null
  fi
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  local total replicate
  total=$(callgrind_annotate --inclusive=yes "$tmp/$label.out" | awk '/PROGRAM TOTALS/ && !done {gsub(",","",$1); print $1; done=1}')
  replicate=$(callgrind_annotate --inclusive=yes "$tmp/$label.out" | awk '/:(RM|VM)_Replicate / && !done {gsub(",","",$1); print $1; done=1}')
  echo "$((total / calls)) $(( ${replicate:-0} / calls ))"
}

# Redisson's RedissonLock.tryLockInnerAsync (redisson/, the one copy).
script=$(<redisson/try-lock-hincrby.lua)
# Redisson RFencedLock's acquire with token (KEYS[2] its counter), and
# RReadWriteLock's read lock (KEYS[2] the owner's hold-key prefix) and write
# lock (ARGV[2] the writer's field).
fenced=$(<redisson/fenced-acquire.lua)
read_script=$(<redisson/rw-read-lock.lua)
write_script=$(<redisson/rw-write-lock.lua)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a/b}'; }
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }

if [[ -n ${BASELINE_MODULE:-} ]]; then
  baseline=$(realpath -m "$BASELINE_MODULE")
  [[ -f $baseline ]] || { echo "error: no module at $baseline" >&2; exit 1; }
  echo "# callgrind-acquire: $("$server" --version)"
  echo "each: redis-benchmark -P 16 -c 1 -n $n -r 100000000, instructions inside call() per command"
  echo "baseline: $baseline"
  echo "this:     $module"
  echo
  echo "| command | baseline | this build | change |"
  echo "|---|---|---|---|"
  # A pipeline of acquire then release of one key, repeated: both halves
  # counted, so per pair = 2 x per call.
  cycle=$tmp/cycle.txt
  for _ in $(seq "$n"); do
    printf 'LOCK.ACQUIRE lock:cycle owner:1 30000\nLOCK.RELEASE lock:cycle owner:1\n'
  done >"$cycle"
  for case in "fresh|LOCK.ACQUIRE lock:__rand_int__ owner:1 30000" \
    "hot|LOCK.ACQUIRE lock:hot owner:1 30000" \
    "token|LOCK.ACQUIRE lock:__rand_int__ owner:1 30000 TOKEN" \
    "cycle|"; do
    label=${case%%|*}
    read -r -a words <<<"${case#*|}"
    figures=()
    for build in "$baseline" "$module"; do
      if [[ $label == cycle ]]; then
        read -r per _ < <(profile_module=$build cycle_file=$cycle profile "$label" CYCLE)
      else
        read -r per _ < <(profile_module=$build profile "$label" "${words[@]}")
      fi
      figures+=("$per")
    done
    what="\`${case#*|}\`"
    [[ $label == cycle ]] && what="\`LOCK.ACQUIRE\` + \`LOCK.RELEASE\` of one key, per command"
    echo "| $what | ${figures[0]} | ${figures[1]} | $(awk -v a="${figures[1]}" -v b="${figures[0]}" 'BEGIN {printf "%+.1f%%", 100*(a-b)/b}') |"
  done
  exit 0
fi

echo "# callgrind-acquire: $("$server" --version)"
echo "each: redis-benchmark -P 16 -c 1 -n $n -r 100000000 (fresh keys: lock:__rand_int__; one key: lock:hot), instructions inside call()"
read -r set_total _ < <(profile set SET 'lock:__rand_int__' v NX PX 30000)
read -r acq_total acq_repl < <(profile acquire LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000)
read -r acq_hot _ < <(profile acquire_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000)
read -r eval_total _ < <(profile evalsha EVALSHA 1 'lock:__rand_int__' 30000 owner:1)
read -r eval_hot _ < <(profile evalsha_hot EVALSHA 1 'lock:hot' 30000 owner:1)
read -r tok_total _ < <(profile token LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000 TOKEN)
read -r tok_hot _ < <(profile token_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000 TOKEN)
read -r fenced_total _ < <(eval_script=$fenced profile fenced EVALSHA 2 'lock:__rand_int__' \
  'redisson_lock_token:{lock:__rand_int__}' 30000 owner:1)
read -r fenced_hot _ < <(eval_script=$fenced profile fenced_hot EVALSHA 2 'lock:hot' \
  'redisson_lock_token:{lock:hot}' 30000 owner:1)
read -r racq_total _ < <(profile racquire LOCK.RACQUIRE 'lock:__rand_int__' owner:1 30000)
read -r racq_hot _ < <(profile racquire_hot LOCK.RACQUIRE 'lock:hot' owner:1 30000)
read -r rscript_total _ < <(eval_script=$read_script profile rscript EVALSHA 2 'lock:__rand_int__' \
  '{lock:__rand_int__}:owner:1:rwlock_timeout' 30000 owner:1 owner:1:write)
read -r rscript_hot _ < <(eval_script=$read_script profile rscript_hot EVALSHA 2 'lock:hot' \
  '{lock:hot}:owner:1:rwlock_timeout' 30000 owner:1 owner:1:write)
read -r wacq_total _ < <(profile wacquire LOCK.WACQUIRE 'lock:__rand_int__' owner:1 30000)
read -r wacq_hot _ < <(profile wacquire_hot LOCK.WACQUIRE 'lock:hot' owner:1 30000)
read -r wscript_total _ < <(eval_script=$write_script profile wscript EVALSHA 1 'lock:__rand_int__' 30000 owner:1:write)
read -r wscript_hot _ < <(eval_script=$write_script profile wscript_hot EVALSHA 1 'lock:hot' 30000 owner:1:write)
read -r sem_total _ < <(setup=semaphore profile semacquire LOCK.SEMACQUIRE sem 1)
read -r permit_total _ < <(setup=semaphore profile permitacquire LOCK.PERMITACQUIRE sem 1 LEASE 30000)
echo
echo "| command | fresh keys | vs SET NX PX | one key re-entered |"
echo "|---|---|---|---|"
echo "| SET NX PX | $set_total | 1.00x | |"
echo "| LOCK.ACQUIRE | $acq_total | $(ratio "$acq_total" "$set_total") | $acq_hot |"
echo "| LOCK.ACQUIRE without its RM_Replicate calls | $((acq_total - acq_repl)) | $(ratio "$((acq_total - acq_repl))" "$set_total") | |"
echo "| EVALSHA (Redisson's script) | $eval_total | $(ratio "$eval_total" "$set_total") | $eval_hot |"
echo "| LOCK.ACQUIRE ... TOKEN | $tok_total | $(ratio "$tok_total" "$set_total") | $tok_hot |"
echo "| EVALSHA (RFencedLock's script) | $fenced_total | $(ratio "$fenced_total" "$set_total") | $fenced_hot |"
echo "| LOCK.RACQUIRE | $racq_total | $(ratio "$racq_total" "$set_total") | $racq_hot |"
echo "| EVALSHA (RReadLock's script) | $rscript_total | $(ratio "$rscript_total" "$set_total") | $rscript_hot |"
echo "| LOCK.WACQUIRE | $wacq_total | $(ratio "$wacq_total" "$set_total") | $wacq_hot |"
echo "| EVALSHA (RWriteLock's script) | $wscript_total | $(ratio "$wscript_total" "$set_total") | $wscript_hot |"
echo "| LOCK.SEMACQUIRE sem 1 (one semaphore) | $sem_total | | |"
echo "| LOCK.PERMITACQUIRE sem 1 LEASE 30000 (one semaphore) | $permit_total | | |"
echo
echo "LOCK.ACQUIRE / EVALSHA = $(ratio3 "$acq_total" "$eval_total") on fresh keys, $(ratio3 "$acq_hot" "$eval_hot") re-entering one key (instructions)"
echo "TOKEN / RFencedLock's script = $(ratio3 "$tok_total" "$fenced_total") on fresh keys, $(ratio3 "$tok_hot" "$fenced_hot") re-entering one key (instructions)"
echo "TOKEN / LOCK.ACQUIRE = $(ratio3 "$tok_total" "$acq_total") on fresh keys, $(ratio3 "$tok_hot" "$acq_hot") re-entering one key"
echo "LOCK.RACQUIRE / RReadLock's script = $(ratio3 "$racq_total" "$rscript_total") on fresh keys, $(ratio3 "$racq_hot" "$rscript_hot") re-entering one key"
echo "LOCK.WACQUIRE / RWriteLock's script = $(ratio3 "$wacq_total" "$wscript_total") on fresh keys, $(ratio3 "$wacq_hot" "$wscript_hot") re-entering one key"
echo
echo "RM_Replicate (1 call: RESTORE): $acq_repl instructions per LOCK.ACQUIRE ($(awk -v a="$acq_repl" -v b="$acq_total" 'BEGIN {printf "%.0f%%", 100*a/b}'))"
if [[ -n ${BEFORE:-} ]]; then
  before=$(realpath "$BEFORE")
  read -r b_acq _ < <(profile_module=$before profile b_acquire LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000)
  read -r b_acq_hot _ < <(profile_module=$before profile b_acquire_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000)
  read -r b_tok _ < <(profile_module=$before profile b_token LOCK.ACQUIRE 'lock:__rand_int__' owner:1 30000 TOKEN)
  read -r b_tok_hot _ < <(profile_module=$before profile b_token_hot LOCK.ACQUIRE 'lock:hot' owner:1 30000 TOKEN)
  echo
  echo "| command (before: \$BEFORE, after: this build) | before | after | after / SET NX PX | after / Redisson's script |"
  echo "|---|---|---|---|---|"
  echo "| LOCK.ACQUIRE, fresh keys | $b_acq | $acq_total | $(ratio "$acq_total" "$set_total") | $(ratio3 "$acq_total" "$eval_total") |"
  echo "| LOCK.ACQUIRE, one key re-entered | $b_acq_hot | $acq_hot | | $(ratio3 "$acq_hot" "$eval_hot") |"
  echo "| LOCK.ACQUIRE ... TOKEN, fresh keys | $b_tok | $tok_total | $(ratio "$tok_total" "$set_total") | $(ratio3 "$tok_total" "$fenced_total") |"
  echo "| LOCK.ACQUIRE ... TOKEN, one key re-entered | $b_tok_hot | $tok_hot | | $(ratio3 "$tok_hot" "$fenced_hot") |"
fi
[[ ${TAX:-yes} == yes ]] || exit 0

# What loading the module costs commands on other keys (docs/performance.md:
# "No tax on the rest of the server"): without the module, with it and
# nothing waited, with it after one waiter of each kind (a server that
# cannot unsubscribe from keyspace events keeps hearing them).
echo
echo "| command on other keys | without the module | module, nothing waited | module, after waits |"
echo "|---|---|---|---|"
for cmd in "INCR counter:__rand_int__" "SET key:__rand_int__ value" "SET key:__rand_int__ value EX 600" \
  "HSET hash:__rand_int__ field value"; do
  read -r -a words <<<"$cmd"
  read -r bare _ < <(load_module=no profile bare "${words[@]}")
  read -r idle _ < <(profile idle "${words[@]}")
  read -r waited _ < <(setup=waits profile waited "${words[@]}")
  echo "| \`$cmd\` | $bare | $idle ($(awk -v a="$idle" -v b="$bare" 'BEGIN {printf "%.3fx", a/b}')) | $waited ($(awk -v a="$waited" -v b="$bare" 'BEGIN {printf "%.3fx", a/b}')) |"
done
