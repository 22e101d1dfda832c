#!/usr/bin/env bash
# The demo, as the README tells:
#
#   bash scripts/demo.sh [options for manage.py ledger_demo]
#
# Makes the virtualenv .venv (Python 3.11+) with the project installed, starts a
# redis-server of its own on a free port with its data in .demo/redis (kept between
# runs), and runs `manage.py ledger_demo` (migrate, admin user, seed data, server on
# http://127.0.0.1:8000/). Ctrl-C stops both. Never touches the Redis on port 6379.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/_redis.sh
. scripts/_redis.sh

VENV=.venv
DEMO_DIR="$PWD/.demo"

make_venv "$VENV"
log "installing the project into $VENV"
"$VENV/bin/python" -m pip install -q -e .
ensure_redis_server "$VENV"

port="${DEMO_REDIS_PORT:-$("$VENV/bin/python" -c '
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
"$REDIS_SERVER_BIN" --port "$port" --bind 127.0.0.1 --dir "$DEMO_DIR/redis" \
    --save "" --appendonly yes --appendfsync everysec --daemonize no \
    --logfile redis.log </dev/null >>"$DEMO_DIR/redis/stdout.log" 2>&1 &
redis_pid=$!

demo_pid=""
stop_all() {
    local pid
    for pid in $demo_pid $redis_pid; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    log "demo stopped"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export REDIS_URL="redis://127.0.0.1:$port/0"
"$VENV/bin/python" - "$REDIS_URL" "$redis_pid" <<'PY' || { tail -n 20 "$DEMO_DIR/redis/redis.log" >&2; exit 1; }
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
log "redis-server $REDIS_URL (data in .demo/redis)"

export DATABASE_PATH="${DATABASE_PATH:-$DEMO_DIR/db.sqlite3}"
export DJANGO_DEBUG="${DJANGO_DEBUG:-1}"
# In the background and waited for, so that a signal to this script (Ctrl-C, or a
# TERM from a supervisor) runs the traps at once and stops the server and Redis.
"$VENV/bin/python" manage.py ledger_demo "$@" &
demo_pid=$!
wait "$demo_pid"
