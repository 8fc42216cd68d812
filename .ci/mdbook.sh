#!/usr/bin/env bash
# Installs mdBook (the version the guide is checked with) once per machine with `cargo install`
# into cargo's own bin directory, outside the clone, as the apt packages of the other steps are:
# a clean clone on the same machine does not build it again. About 2.7 min of building on 2
# cores the first time. Prints the program's path. A lock lets .ci/test.sh install it in the
# background while .ci/docs.sh may ask for it: the second caller waits for the first.
set -euo pipefail
MDBOOK_VERSION=0.5.4
root=${CARGO_HOME:-$HOME/.cargo}
mdbook=$root/bin/mdbook
mkdir -p "$root"
exec 9>"$root/.tvmrt-mdbook.lock"
flock 9
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
  cargo install mdbook --locked --no-default-features --version "$MDBOOK_VERSION" \
    --root "$root" >&2
fi
echo "$mdbook"
