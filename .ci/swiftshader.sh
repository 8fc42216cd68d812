#!/usr/bin/env bash
# SwiftShader, Google's Vulkan on the CPU, as the second Vulkan driver of the tests (issue 34):
# unlike lavapipe it has no VK_KHR_push_descriptor (kernels bind descriptor sets) and no
# float64/int64 in shaders. Debian ships it only inside chromium-common (with 98 packages of
# browser dependencies), so this takes that package's file by `apt-get download` and unpacks
# just libvk_swiftshader.so (5 MiB) into target/swiftshader, then writes an ICD manifest for
# it. Prints the manifest's path (for VK_ICD_FILENAMES); reuses an earlier download.
#
#   VK_ICD_FILENAMES=$(.ci/swiftshader.sh) cargo test --test vulkan_kernels
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$root/target/swiftshader"
lib="$dir/libvk_swiftshader.so"
icd="$dir/swiftshader_icd.json"
if [ ! -f "$lib" ]; then
  mkdir -p "$dir/deb"
  (cd "$dir/deb" && rm -f ./*.deb && apt-get download chromium-common >&2) || {
    echo "swiftshader.sh: apt-get download chromium-common failed (run apt-get update?)" >&2
    exit 1
  }
  dpkg-deb --fsys-tarfile "$dir"/deb/chromium-common_*.deb |
    tar -x -C "$dir/deb" ./usr/lib/chromium/libvk_swiftshader.so
  mv "$dir/deb/usr/lib/chromium/libvk_swiftshader.so" "$lib"
  rm -rf "$dir/deb"
fi
printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' \
  "$lib" >"$icd"
echo "$icd"
