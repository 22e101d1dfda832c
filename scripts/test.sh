#!/usr/bin/env bash
# The project's whole check, as CI runs it (.ci/run) and as the README tells:
#
#   bash scripts/test.sh [tox env list]
#
# Tests on Python 3.11 + Django 5.2 and Python 3.13 + Django 6.1, then on a local
# Redis Cluster (Python 3.11 + Django 5.2, LEDGER_TEST_CLUSTER=1), ruff and mypy,
# through tox in the virtualenv .venv-ci. Needs Python 3.11+ and a redis-server
# (installed if missing). The tests start their own redis-servers on free ports;
# nothing here touches the Redis on port 6379.
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
if ! "$VENV/bin/python" -c 'import tox' >/dev/null 2>&1; then
    log "installing tox into $VENV"
    "$VENV/bin/python" -m pip install -q 'tox>=4.11'
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

if [ "$#" -gt 0 ]; then
    envs="$*"
else
    tests=()
    [ -e "$PYTHONS/python3.11" ] && tests+=(py311-django52)
    [ -e "$PYTHONS/python3.13" ] && tests+=(py313-django61)
    # The suite again on a local Redis Cluster (tox.ini's cluster env, Python 3.11).
    [ -e "$PYTHONS/python3.11" ] && tests+=(cluster)
    if [ ! -e "$PYTHONS/python3.13" ]; then
        warn_loudly "python3.13 NOT FOUND: Django 6.1 on Python 3.13 IS NOT TESTED." \
            "Install Python 3.13 (pyenv install 3.13, or apt-get install python3.13)."
    fi
    if [ "${#tests[@]}" -eq 0 ]; then
        log "ERROR: neither python3.11 nor python3.13 found: no test environment can run"
        exit 1
    fi
    envs="$(IFS=,; echo "${tests[*]},lint,type")"
fi

ensure_chromium
ensure_postgresql
log "tox -e $envs"
output="$VENV/tox-output.log"
set +e
"$VENV/bin/tox" -e "$envs" 2>&1 | tee "$output"
status="${PIPESTATUS[0]}"
set -e

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
