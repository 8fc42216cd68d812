# Helpers the CI scripts source: step, run, apt_install.

failed=()
step() { printf '\n==> %s\n' "$*"; }
# run NAME CMD...: runs CMD as the step NAME; a failure is recorded in `failed`, not fatal.
run() {
  local name=$1 start=$SECONDS
  shift
  step "$name"
  if "$@"; then
    echo "ok: $name ($((SECONDS - start)) s)"
  else
    echo "FAILED: $name ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

# apt_install PKG...: installs Debian/Ubuntu packages (as root, or through sudo).
apt_updated=
APT_LOCK=${TMPDIR:-/tmp}/tvmrt-apt.lock
apt_install() {
  local sudo=
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then sudo=sudo; else
      echo "cannot install $*: not root and no sudo"
      return 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    echo "no apt-get: install $* with your package manager"
    return 1
  fi
  # One apt at a time: .ci/test.sh's background builds install the cross compilers while the
  # steps in front install theirs (apt-get fails at once on a lock another apt holds).
  (
    flock -w 1800 9 || { echo "apt_install: waited 30 min for $APT_LOCK"; exit 1; }
    if [ -z "$apt_updated" ]; then
      $sudo apt-get update -qq || exit 1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
  ) 9>"$APT_LOCK" || return 1
  apt_updated=1
}
