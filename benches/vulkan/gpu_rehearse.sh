#!/usr/bin/env bash
# Rehearses benches/vulkan/gpu_run.sh here, on lavapipe (CI's driver), from a packed DIR alone,
# as the device tool would run it: a copy of the repository's files (tracked and untracked, not
# ignored: what the tool sends) under /tmp/vkgpu-rehearsal/repo with DIR in .devrun/vk, and /work
# hidden behind an empty folder in a private mount namespace (root only), so the path compiled
# into the tests (DIR/BUILD_ROOT) is missing and gpu_run.sh must link it to the copy.
#
#   benches/vulkan/gpu_rehearse.sh .devrun/vk     # after benches/vulkan/gpu_pack.sh .devrun/vk
set -eu
[ $# -eq 1 ] || {
  echo "usage: $0 DIR (made by gpu_pack.sh)" >&2
  exit 2
}
pack=$(cd "$1" && pwd -P)
src=$(cd "$(dirname "$0")/../.." && pwd -P)
t=/tmp/vkgpu-rehearsal
rm -rf "$t" && mkdir -p "$t/repo/.devrun" "$t/emptywork" "$t/out"
(cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf -) | tar -C "$t/repo" -xf -
cp -r "$pack" "$t/repo/.devrun/vk"
cp "$src/benches/vulkan/gpu_run.sh" "$t/repo/.devrun/vk/"
du -sh "$t/repo/.devrun/vk"
cd "$t/repo"
rc=0
unshare -m bash -c "mount --bind $t/emptywork /work &&
  VKGPU_EXPECT=llvmpipe VK_DRIVER_FILES=\$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json) \
  OUT=$t/out bash .devrun/vk/gpu_run.sh .devrun/vk" || rc=$?
rm -rf "$t/repo" "$t/emptywork"
echo "rehearsal exit $rc (log: $t/out/vulkan_gpu.log)"
exit $rc
