#!/usr/bin/env bash
# The demo, as the README tells:
#
#   bash scripts/demo.sh [options for manage.py ledger_demo]
#
# Makes the virtualenv .venv with the first python3 (or python3.11 .. python3.13) on
# PATH that is 3.11 or newer, and installs the project there: Django 5.2 with the
# django-tasks backport (the "tasks" extra) on Python 3.11, Django 6 on 3.12 and later.
# Starts a redis-server of its own on a free port with its data in .demo/redis (kept
# between runs: rm -rf .demo starts clean), writes .demo/env (the demo's REDIS_URL and
# database: manage.py run from another terminal reads it while the demo runs), and runs
# `manage.py ledger_demo` (migrate, the admin user with the password kept in
# .demo/admin-password, seed each queue once, server on http://127.0.0.1:8000/) beside a
# `ledger_worker tasks --scheduler` (log in .demo/worker.log). A worker that dies is
# replaced, and the terminal says so; one that dies within 10 s of its start three
# times running stops the demo, as the admin server or Redis ending does. Ctrl-C or
# SIGTERM stops everything, however the script was started, and removes .demo/env.
# Never touches the Redis on port 6379.
#
# Environment:
#   DEMO_DIR         the demo's folder (default: .demo in the project root)
#   DEMO_REDIS_PORT  the demo Redis's port (default: 6390 when free, else any free port)
#   DEMO_PYTHON      an interpreter that has the project installed: used as it is, with
#                    no virtualenv made and nothing installed (the tests use this)
set -euo pipefail

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
cd "$(dirname "$SCRIPT")/.."
# shellcheck source=scripts/_redis.sh
. scripts/_redis.sh

# A script's background job starts with SIGINT ignored, and bash can neither trap nor
# reset a signal ignored on entry (trap -p then lists it as ''). So start again, once,
# through a Python that puts INT and TERM back to their defaults first.
if [ -z "${_DEMO_SIGNALS_RESET:-}" ] && [ -n "$(trap -p INT TERM)" ]; then
    export _DEMO_SIGNALS_RESET=1
    python="${DEMO_PYTHON:-$(find_base_python || command -v python3)}"
    exec "$python" -c '
import os, signal, sys
# Python itself ignores SIGPIPE and SIGXFSZ: give bash the defaults of those too.
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(number, signal.SIG_DFL)
os.execvp("bash", ["bash", *sys.argv[1:]])
' "$SCRIPT" "$@"
fi
unset _DEMO_SIGNALS_RESET

DEMO_DIR="$(mkdir -p "${DEMO_DIR:-.demo}" && cd "${DEMO_DIR:-.demo}" && pwd)"
export DEMO_DIR
ENV_FILE="$DEMO_DIR/env"

# -- the demo's processes: each in the background, stopped in reverse order ----------
pids=()
names=()

start_bg() { # start_bg NAME COMMAND...: run COMMAND in the background as NAME
    local name="$1"
    shift
    "$@" &
    pids+=("$!")
    names+=("$name")
}

stop_pid() { # stop_pid PID: TERM it, KILL it after 10 s, and wait for it
    local pid="$1" watchdog=""
    kill -TERM "$pid" 2>/dev/null || return 0
    if [ -n "${PY:-}" ]; then
        "$PY" -c 'import os, signal, sys, time
time.sleep(10)
os.kill(int(sys.argv[1]), signal.SIGKILL)' "$pid" >/dev/null 2>&1 &
        watchdog=$!
    fi
    # A signal trapped meanwhile interrupts wait; a child not yet waited for still
    # answers kill -0 (as a zombie), so this loops until it is really gone.
    while kill -0 "$pid" 2>/dev/null; do
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$watchdog" ]; then
        kill "$watchdog" 2>/dev/null || true
        wait "$watchdog" 2>/dev/null || true
    fi
}

stop_all() {
    local i
    trap ':' INT TERM # a second Ctrl-C must not cut the stopping short
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop_pid "${pids[i]}"
    done
    if [ -f "$ENV_FILE" ] && grep -qx "DEMO_PID=$$" "$ENV_FILE"; then
        rm -f "$ENV_FILE"
    fi
    log "demo stopped"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One demo per folder: two redis-servers appending to one AOF would ruin it.
if [ -f "$ENV_FILE" ]; then
    other="$(sed -n 's/^DEMO_PID=//p' "$ENV_FILE")"
    if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then
        log "ERROR: a demo is running already (pid $other, settings in $ENV_FILE)"
        exit 1
    fi
    rm -f "$ENV_FILE" # left by a demo that was killed outright
fi

# install_project: the project into $VENV, with what Django's task framework needs there.
# Django 6.0+ has django.tasks built in but needs Python 3.12, so on Python 3.11 pip takes
# Django 5.2, which needs the django-tasks backport: the "tasks" extra.
install_project() {
    local spec=.
    if "$PY" -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then # below 3.12
        spec=".[tasks]"
    fi
    log "installing the project into $VENV (pip install -e '$spec')"
    "$PY" -m pip install -q -e "$spec"
    # A .venv of an earlier run may hold a Django 5.2 of its own: check, whatever the Python.
    if ! "$PY" -c "$HAS_TASK_FRAMEWORK"; then
        log "Django $("$PY" -m django --version) has no django.tasks: adding the tasks extra"
        "$PY" -m pip install -q -e ".[tasks]"
    fi
}
HAS_TASK_FRAMEWORK='
import importlib.util, sys, django
sys.exit(django.VERSION < (6, 0) and importlib.util.find_spec("django_tasks") is None)'

if [ -n "${DEMO_PYTHON:-}" ]; then
    PY="$DEMO_PYTHON"
    VENV="$(dirname "$(dirname "$PY")")"
    log "using $PY as it is (DEMO_PYTHON): no virtualenv made, nothing installed"
else
    VENV=.venv
    PY="$VENV/bin/python"
    make_venv "$VENV"
    install_project
fi
ensure_redis_server "$VENV"

port="${DEMO_REDIS_PORT:-$("$PY" -c '
import socket
for port in [6390, 0]:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(s.getsockname()[1])
        break
')}"
if [ "$port" = 6379 ]; then
    log "ERROR: port 6379 belongs to the machine's Redis; pick another DEMO_REDIS_PORT"
    exit 1
fi

mkdir -p "$DEMO_DIR/redis"
start_bg redis-server "$REDIS_SERVER_BIN" --port "$port" --bind 127.0.0.1 \
    --dir "$DEMO_DIR/redis" --save "" --appendonly yes --appendfsync everysec \
    --daemonize no --logfile redis.log </dev/null >>"$DEMO_DIR/redis/stdout.log" 2>&1

export REDIS_URL="redis://127.0.0.1:$port/0"
"$PY" - "$REDIS_URL" "${pids[0]}" <<'PY' || { tail -n 20 "$DEMO_DIR/redis/redis.log" >&2; exit 1; }
import sys, time
import redis
url, pid = sys.argv[1], int(sys.argv[2])
client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        if int(client.info("server")["process_id"]) == pid:
            sys.exit(0)
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        pass
    time.sleep(0.05)
sys.exit(f"redis-server (pid {pid}) did not answer on {url} within 10 s")
PY
log "redis-server $REDIS_URL (data in $DEMO_DIR/redis)"

export DATABASE_PATH="${DATABASE_PATH:-$DEMO_DIR/db.sqlite3}"
export DJANGO_DEBUG="${DJANGO_DEBUG:-1}"
export LEDGER_NAMESPACE="${LEDGER_NAMESPACE:-ledger}"
export LEDGER_DEMO=1 # testproject/settings.py: the demo's task queue, tasks and schedules
export PYTHONUNBUFFERED=1 # every line of the server and the worker shows as it happens
cat >"$ENV_FILE.tmp" <<EOF
# The running demo's settings, written by scripts/demo.sh and removed when it stops.
# testproject/settings.py reads them when REDIS_URL is not set in the environment.
REDIS_URL=$REDIS_URL
DATABASE_PATH=$DATABASE_PATH
DJANGO_DEBUG=$DJANGO_DEBUG
LEDGER_NAMESPACE=$LEDGER_NAMESPACE
LEDGER_DEMO=1
DEMO_PID=$$
EOF
mv "$ENV_FILE.tmp" "$ENV_FILE"
log "settings in $ENV_FILE: manage.py in another terminal uses this demo while it runs"

# The admin's password is kept in $DEMO_DIR/admin-password: a restart prints the same one.
start_bg "the admin server" "$PY" manage.py ledger_demo --skip tasks \
    --password-file "$DEMO_DIR/admin-password" "$@"

# A worker with the scheduler inside: the demo's schedules admit tasks into the "tasks"
# queue every few seconds and it runs them, so the admin shows work flowing. A worker
# that dies (kill it: nothing is lost) is replaced; one that keeps dying at once is not.
WORKER_LOG="$DEMO_DIR/worker.log"
start_worker() {
    "$PY" manage.py ledger_worker tasks --scheduler --concurrency 4 >>"$WORKER_LOG" 2>&1 &
    worker_pid=$!
    worker_since=$SECONDS
}
start_worker
pids+=("$worker_pid")
names+=("the worker")
log "worker: ledger_worker tasks --scheduler, pid $worker_pid (log in $WORKER_LOG)"

# Wait for whichever process ends first: a worker is started again, anything else stops
# the rest (the EXIT trap). A signal interrupts the wait at once and runs its trap.
QUICK_SECONDS=10 # a worker that ends sooner than this after its start ended "at once"
quick=0
while :; do
    status=0
    wait -n || status=$?
    ended=""
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[i]}" 2>/dev/null; then # waited for already: not to be stopped
            ended="$i"
        fi
    done
    [ -n "$ended" ] || continue
    if [ "${pids[ended]}" = "$worker_pid" ]; then
        if ((SECONDS - worker_since < QUICK_SECONDS)); then
            quick=$((quick + 1))
        else
            quick=0
        fi
        if ((quick < 3)); then
            old="$worker_pid"
            start_worker
            pids[ended]="$worker_pid"
            log "the worker (pid $old) ended with status $status: started another, pid $worker_pid (log in $WORKER_LOG)"
            continue
        fi
        log "the worker ended with status $status, 3 times within ${QUICK_SECONDS} s of its start; the end of $WORKER_LOG:"
        tail -n 15 "$WORKER_LOG" >&2 || true
    fi
    log "${names[ended]} ended with status $status: stopping the demo"
    unset 'pids[ended]'
    pids=("${pids[@]}")
    exit "$status"
done
