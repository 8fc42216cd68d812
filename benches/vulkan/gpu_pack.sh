#!/usr/bin/env bash
# Packs what benches/vulkan/gpu_run.sh needs to run the Vulkan suite on a GPU machine's own
# driver (issue 34: "when a session has a GPU machine, run the Vulkan suite there as well"),
# for the device tool, which carries a git-ignored folder of the repository (`carry`) but has
# no Rust, no network and maybe no Vulkan loader:
#
#   benches/vulkan/gpu_pack.sh .devrun/vk        # here, in the repository's root
#   benches/vulkan/gpu_pack.sh --copy OTHER/.devrun/vk .devrun/vk   # reuse a pack, no build
#
# into DIR:
#   bin.tar.xz   the four Vulkan test binaries (tests/vulkan_{device,host,kernels,graph}.rs),
#                release build, stripped, and the `tvmrt` tool (unless VK_PACK_NO_TOOL=1)
#   debs/        Debian 12 packages: libvulkan1 (the loader; the README of the device tool
#                unpacks it into / there), vulkan-validationlayers (the Khronos layer the tests
#                require, unpacked elsewhere), glslang-tools (the tests compile their shaders
#                with glslangValidator at run time)
#   BUILD_ROOT   the repository path compiled into the test binaries (CARGO_MANIFEST_DIR: they
#                find tests/fixtures through it); gpu_run.sh links it to the copy it runs in
#   gpu_run.sh   a copy of the run script
#
# The build is the release profile without fat LTO (CARGO_PROFILE_RELEASE_* below): the tests
# need optimized code, not the shipped library's link-time work, which would take the 2-core
# machine many minutes per binary. Unpacked, DIR is about 15 MB; the device tool counts it
# against the 64 MiB the working tree may take.
set -euo pipefail

from=
if [ "${1:-}" = --copy ] && [ $# -eq 3 ]; then
  # `--copy FROM DIR`: DIR becomes a copy of FROM, a folder this script packed before (in
  # another worktree, say): no build, which takes about 15 minutes on a busy 2-core machine.
  from=$2
  shift 2
  [ -f "$from/bin.tar.xz" ] && [ -f "$from/BUILD_ROOT" ] || {
    echo "$from is no folder gpu_pack.sh made" >&2
    exit 2
  }
fi
[ $# -eq 1 ] || {
  echo "usage: $0 [--copy FROM] DIR (a git-ignored folder of this repository, e.g. .devrun/vk)" >&2
  exit 2
}
root=$(cd "$(dirname "$0")/../.." && pwd -P)
cd "$root"
mkdir -p "$1"
dir=$(cd "$1" && pwd -P)
case "$dir/" in
"$root"/*) ;;
*) echo "note: $dir is outside the repository: the device tool carries only folders inside it" >&2 ;;
esac

# The device tool carries only ignored folders that `carry` names: make sure DIR is ignored
# (a line in the shared .git/info/exclude, which worktrees read too).
rel=${dir#"$root"/}
if [ "$rel" != "$dir" ] && ! git check-ignore -q "$rel/x"; then
  top=/${rel%%/*}/
  exclude=$(git rev-parse --git-common-dir)/info/exclude
  mkdir -p "$(dirname "$exclude")"
  echo "$top" >>"$exclude"
  echo "added $top to $exclude"
fi

if [ -n "$from" ]; then
  [ "$(cd "$from" && pwd -P)" != "$dir" ] || {
    echo "FROM and DIR are the same folder" >&2
    exit 2
  }
  rm -rf "$dir"
  cp -r "$from" "$dir"
  cp benches/vulkan/gpu_run.sh "$dir/gpu_run.sh"
  echo "== $dir (a copy of $from; the tests were built in $(cat "$dir/BUILD_ROOT"))"
  du -sh "$dir"
  exit 0
fi

export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_INCREMENTAL=false

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"

# The test binaries: cargo names them with a hash; its JSON messages say which file is which.
echo "== building the Vulkan test binaries (release)"
json="$stage/build.json"
cargo test --release --no-run --message-format=json \
  --test vulkan_device --test vulkan_host --test vulkan_kernels --test vulkan_graph >"$json"
python3 - "$json" "$stage/bin" <<'EOF'
import json, shutil, sys
want = {"vulkan_device", "vulkan_host", "vulkan_kernels", "vulkan_graph"}
found = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["name"] in want and "test" in m["target"]["kind"]:
        found[m["target"]["name"]] = m["executable"]
missing = want - found.keys()
if missing:
    sys.exit(f"no test binary for {sorted(missing)}")
for name, exe in sorted(found.items()):
    shutil.copy(exe, f"{sys.argv[2]}/{name}")
    print(f"  {name} <- {exe}")
EOF

if [ "${VK_PACK_NO_TOOL:-0}" != 1 ]; then
  echo "== building the tvmrt tool (release)"
  cargo build --release -p tvmrt-cli --bin tvmrt --message-format=json >"$json"
  python3 - "$json" "$stage/bin" <<'EOF'
import json, shutil, sys
exe = None
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "tvmrt" \
            and m.get("executable"):
        exe = m["executable"]
if not exe:
    sys.exit("no tvmrt binary")
shutil.copy(exe, f"{sys.argv[2]}/tvmrt")
print(f"  tvmrt <- {exe}")
EOF
fi
strip "$stage"/bin/*
# xz: the five binaries share most of their code, which a solid xz archive stores once
# (about 3 MB for the four tests, against 9 with gzip).
rm -f "$dir/bin.tar.xz"
tar -C "$stage" -cf - bin | xz -T0 -9 >"$dir/bin.tar.xz"

# The packages, as the device tool's README fetches them: amd64 lists of their own under /tmp,
# whatever this machine's architecture.
echo "== downloading the Debian packages"
mkdir -p "$dir/debs" /tmp/amd64/partial
rm -f "$dir"/debs/*.deb "$dir"/debs/glvnd/*.deb
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
apt-get "${o[@]}" update -qq
(cd "$dir/debs" && apt-get "${o[@]}" download -qq libvulkan1 vulkan-validationlayers glslang-tools)
# GLVND, which NVIDIA's Vulkan driver (libGLX_nvidia.so.0, its manifest's library) needs
# (libGLdispatch.so.0); the device tool's README carries the same set.
mkdir -p "$dir/debs/glvnd"
(cd "$dir/debs/glvnd" &&
  apt-get "${o[@]}" download -qq libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2)

printf '%s\n' "$root" >"$dir/BUILD_ROOT"
cp benches/vulkan/gpu_run.sh "$dir/gpu_run.sh"
echo "== $dir"
ls -l "$dir" "$dir/debs"
du -sh "$dir"
