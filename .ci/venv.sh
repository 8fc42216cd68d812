#!/usr/bin/env bash
# Python virtual environments for the tests, one per pinned requirements file.
#
#   .ci/venv.sh NAME        creates (or reuses) .venv/NAME from .ci/requirements/NAME.txt
#                           and prints the path of its python on stdout.
#
# A venv is rebuilt when its requirements file changes (the file's hash is kept inside it).
# Every requirement is pinned with ==, so CI and a newcomer get the same packages. Sourcing
# this file instead defines the function `venv_python NAME` for other scripts.
set -euo pipefail

venv_python() {
  local name=$1
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local req="$root/.ci/requirements/$name.txt"
  local dir="$root/.venv/$name"
  if [ ! -f "$req" ]; then
    echo "venv.sh: no requirements file $req" >&2
    return 1
  fi
  local want
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ ! -x "$dir/bin/python" ] || [ "$(cat "$dir/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    echo "venv.sh: creating $dir from $req" >&2
    rm -rf "$dir"
    python3 -m venv "$dir" >&2 || return 1
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "$req" >&2 || return 1
    echo "$want" >"$dir/.requirements.sha256"
  fi
  echo "$dir/bin/python"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  [ $# -eq 1 ] || { echo "usage: .ci/venv.sh NAME" >&2; exit 2; }
  venv_python "$1"
fi
