#!/usr/bin/env bash
# Runs the Vulkan suite on a GPU machine's own driver (issue 34), from what
# benches/vulkan/gpu_pack.sh put in DIR, in the root of a copy of the repository:
#
#   bash benches/vulkan/gpu_run.sh .devrun/vk
#
# Steps, each PASS or FAIL, then a summary; the exit status is nonzero when one fails:
#   setup      unpack: the Vulkan loader into / when the machine has none (as the device tool's
#              README does), the validation layer and glslang into a scratch root; pick the
#              NVIDIA driver (VK_DRIVER_FILES) unless the caller set one; make the repository
#              path compiled into the tests (DIR/BUILD_ROOT) lead to this copy
#   device     the device vulkan:0 is, as tvmrt's debug log names it
#   tests      the four test binaries with the validation layer on (zero errors), push
#              descriptors where the driver has them, TVMRT_TEST_VULKAN_DEVICE naming the driver
#   sets       the same with TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1 (the descriptor-set path)
#   tool       the `tvmrt` tool runs add_scale, the Relax MLP and the Relax CNN of
#              tests/fixtures/vulkan on --device vulkan and matches TVM's CPU results
# Logs go to $OUT/vulkan_gpu.log when OUT is set (the device tool's output folder).
#
# Rehearsal on another driver: VKGPU_EXPECT=llvmpipe VK_DRIVER_FILES=<lavapipe's json> ...
set -u

[ $# -eq 1 ] && [ -f "$1/bin.tar.xz" ] || {
  echo "usage: $0 DIR (made by benches/vulkan/gpu_pack.sh), in the repository's root" >&2
  exit 2
}
t0=$(date +%s)
dir=$(cd "$1" && pwd -P)
repo=$(pwd -P)
expect=${VKGPU_EXPECT:-NVIDIA}
work=$(mktemp -d /tmp/vkgpu.XXXXXX)
log=${OUT:+$OUT/vulkan_gpu.log}
log=${log:-$work/vulkan_gpu.log}
: >"$log"
results=()
failed=0

say() { echo "$*" | tee -a "$log"; }
# step NAME CMD...: runs CMD with its output in the log (and its last lines on the console
# when it fails), records PASS/FAIL.
step() {
  local name=$1 s rc
  shift
  s=$(date +%s)
  echo "===== $name: $*" >>"$log"
  "$@" >"$work/step.out" 2>&1
  rc=$?
  cat "$work/step.out" >>"$log"
  # Test binaries' counts ("test result: ok. 10 passed; 0 failed; 3 ignored; ..."), summed.
  local counts
  counts=$(awk '/^test result:/ { p += $4; f += $6; i += $8; n++ }
    END { if (n) printf ", %d binaries: %d passed, %d failed, %d ignored", n, p, f, i }' \
    "$work/step.out")
  if [ $rc -eq 0 ]; then
    results+=("PASS $name ($(($(date +%s) - s)) s$counts)")
  else
    results+=("FAIL $name (exit $rc, $(($(date +%s) - s)) s$counts)")
    failed=1
    # The failures (libtest prints each test's panic under `---- NAME stdout ----`), then the
    # last lines; the whole output is in the log.
    echo "----- $name failed (exit $rc):"
    grep -E -A 8 '^---- |panicked at|^FAIL' "$work/step.out" | head -n 120
    echo "----- its last lines:"
    tail -n 12 "$work/step.out"
  fi
  say "${results[-1]}"
}

# A .deb's files under ROOT: dpkg -x where there is dpkg, else Python (ar + tar).
unpack_deb() {
  if command -v dpkg >/dev/null; then
    dpkg -x "$1" "$2"
  else
    python3 - "$1" "$2" <<'EOF'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n", "not a .deb"
at = 8
while at < len(data):
    name = data[at:at + 16].decode().strip().rstrip("/")
    size = int(data[at + 48:at + 58])
    body = data[at + 60:at + 60 + size]
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
    at += 60 + size + (size & 1)
EOF
  fi
}

setup() (
  set -e
  tar -xJf "$dir/bin.tar.xz" -C "$work" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$dir/bin.tar.xz" "$work"
  ls -l "$work/bin"
  # The loader: into / as the device tool's README says, where the machine has none.
  if ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
    echo "the machine has a Vulkan loader"
  elif command -v dpkg >/dev/null; then
    for f in "$dir"/debs/libvulkan1_*.deb; do dpkg -x "$f" /; done
    ldconfig
    ldconfig -p | grep 'libvulkan\.so\.1'
  else
    unpack_deb "$dir"/debs/libvulkan1_*.deb "$work/root"
    echo "TVMRT_VULKAN_LIBRARY=$(echo "$work"/root/usr/lib/*/libvulkan.so.1)" >>"$work/env"
  fi
  # GLVND into / as well (the README's set): NVIDIA's driver library needs libGLdispatch.
  if command -v dpkg >/dev/null && ls "$dir"/debs/glvnd/*.deb >/dev/null 2>&1; then
    for f in "$dir"/debs/glvnd/*.deb; do dpkg -x "$f" /; done
    ldconfig
    ldconfig -p | grep -E 'libGLdispatch|libGLX_nvidia' || true
  fi
  # The validation layer and glslang elsewhere: other packages can break /.
  for f in "$dir"/debs/vulkan-validationlayers_*.deb "$dir"/debs/glslang-tools_*.deb; do
    unpack_deb "$f" "$work/root"
  done
  local json lib
  json=$work/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
  lib=$(echo "$work"/root/usr/lib/*/libVkLayer_khronos_validation.so)
  [ -f "$json" ] && [ -f "$lib" ]
  # Its manifest names the library bare (found on the library path): name it whole.
  sed -i "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$lib\"|" "$json"
  grep library_path "$json"
  echo "VK_LAYER_PATH=$(dirname "$json")" >>"$work/env"
  echo "PATH=$work/root/usr/bin:$PATH" >>"$work/env"
  "$work/root/usr/bin/glslangValidator" --version | head -n 1
  # The driver: the caller's, else NVIDIA's manifest where the machine has one.
  if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ]; then
    for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
      /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
      if [ -f "$f" ]; then
        echo "VK_DRIVER_FILES=$f" >>"$work/env"
        break
      fi
    done
    if ! grep -q VK_DRIVER_FILES "$work/env"; then
      f=$(find /usr/local/nvidia /etc/vulkan /usr/share/vulkan -name 'nvidia_icd*.json' \
        2>/dev/null | head -n 1)
      [ -z "$f" ] || echo "VK_DRIVER_FILES=$f" >>"$work/env"
    fi
  fi
  # NVIDIA's manifest names its library bare (libGLX_nvidia.so.0): where the machine's
  # library cache lacks it, the driver's own folders.
  if ! ldconfig -p 2>/dev/null | grep -q libGLX_nvidia; then
    local ld=${LD_LIBRARY_PATH:-}
    for d in /usr/local/nvidia/lib /usr/local/nvidia/lib64; do
      [ ! -d "$d" ] || ld=$d${ld:+:$ld}
    done
    [ "$ld" = "${LD_LIBRARY_PATH:-}" ] || echo "LD_LIBRARY_PATH=$ld" >>"$work/env"
  fi
  cat "$work/env"
  # The tests find tests/fixtures through the path they were built in: lead it here.
  local built
  built=$(cat "$dir/BUILD_ROOT")
  if [ "$(cd "$built" 2>/dev/null && pwd -P)" = "$repo" ]; then
    echo "built in $built, which is this copy"
  elif [ ! -e "$built" ] && [ ! -L "$built" ]; then
    mkdir -p "$(dirname "$built")"
    ln -s "$repo" "$built"
    echo "linked $built -> $repo"
  elif [ -d "$built/tests/fixtures/vulkan" ]; then
    echo "note: $built is another copy of the repository; the tests read its fixtures"
  else
    echo "$built (compiled into the tests) exists and is not this repository" >&2
    return 1
  fi
  echo "BUILT=$built" >>"$work/env"
)

# with_env CMD...: CMD under the environment setup chose.
with_env() {
  (
    set -a
    # shellcheck disable=SC1091
    . "$work/env"
    set +a
    cd "$BUILT" && "$@"
  )
}

device() {
  if [ -x "$work/bin/tvmrt" ]; then
    # The tool's debug log names the device it opens.
    TVMRT_LOG=debug timeout 30 "$work/bin/tvmrt" run tests/fixtures/vulkan/add_scale.so \
      add_scale -i tests/fixtures/vulkan/data/add_scale.n1.in0.npy \
      -i tests/fixtures/vulkan/data/add_scale.n1.in1.npy -i float:0.75 -o float32:1 \
      --device vulkan:0 >"$work/device.out" 2>&1
    cat "$work/device.out"
    grep -o 'Vulkan device `[^`]*` (push descriptors: [a-z]*)' "$work/device.out" | head -n 1 |
      tee "$work/device.name"
    if ! grep -q "$expect" "$work/device.name"; then
      # Why the loader found no driver: its own log of the drivers it tried.
      VK_LOADER_DEBUG=error,warn,driver timeout 30 "$work/bin/tvmrt" run \
        tests/fixtures/vulkan/add_scale.so add_scale \
        -i tests/fixtures/vulkan/data/add_scale.n1.in0.npy \
        -i tests/fixtures/vulkan/data/add_scale.n1.in1.npy -i float:0.75 -o float32:1 \
        --device vulkan:0 2>&1 | tail -n 40
      return 1
    fi
  else
    # Without the tool: the test that asserts vulkan:0 is the driver asked for.
    TVMRT_TEST_VULKAN_DEVICE=$expect timeout 30 "$work/bin/vulkan_kernels" \
      the_driver_is_the_one_the_run_asks_for --exact --nocapture
  fi
}

# suite [ENV=VALUE...]: the four test binaries, each bounded.
suite() {
  local rc=0 b
  for b in vulkan_kernels vulkan_device vulkan_host vulkan_graph; do
    echo "--- $b $*"
    env RUST_BACKTRACE=0 "$@" timeout 60 "$work/bin/$b" -q 2>&1 || rc=1
  done
  return $rc
}

# tool: the tool's runs of the fixtures against TVM's CPU results (tests/fixtures/vulkan/data),
# within 1e-5 relative, with the validation layer on and no error from it.
tool() {
  local f=tests/fixtures/vulkan d=$work/tool rc=0
  mkdir -p "$d"
  run1() {
    local name=$1 want=$2
    shift 2
    rm -f "$d/output0.npy"
    echo "--- $name: tvmrt run $*"
    TVMRT_LOG=warn TVM_VULKAN_ENABLE_VALIDATION_LAYERS=1 timeout 60 "$work/bin/tvmrt" run "$@" \
      --device vulkan:0 --save "$d" >"$d/$name.out" 2>&1
    local r=$?
    cat "$d/$name.out"
    [ $r -eq 0 ] || { echo "FAIL $name: exit $r"; return 1; }
    if grep -q 'ERROR.*Vulkan validation' "$d/$name.out"; then
      echo "FAIL $name: the validation layer reported"
      return 1
    fi
    python3 - "$d/output0.npy" "$want" "$name" <<'EOF'
import array, ast, sys
def npy(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[8:10], "little") if data[6] == 1 else int.from_bytes(data[8:12], "little")
    start = 10 if data[6] == 1 else 12
    head = ast.literal_eval(data[start:start + n].decode("latin1"))
    assert head["descr"] == "<f4" and not head["fortran_order"], head
    a = array.array("f")
    a.frombytes(data[start + n:])
    return head["shape"], a
(gs, got), (ws, want) = npy(sys.argv[1]), npy(sys.argv[2])
assert gs == ws, f"{sys.argv[3]}: shape {gs}, want {ws}"
bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-5 * (1 + abs(w))]
worst = max(abs(g - w) for g, w in zip(got, want))
print(f"{sys.argv[3]}: {len(got)} values, shape {list(gs)}, max |diff| {worst:.3g}")
assert not bad, f"{sys.argv[3]}: {len(bad)} values off, first {bad[:3]}"
EOF
  }
  run1 add_scale "$f/data/add_scale.n1000.out0.npy" "$f/add_scale.so" add_scale \
    -i "$f/data/add_scale.n1000.in0.npy" -i "$f/data/add_scale.n1000.in1.npy" \
    -i float:0.75 -o float32:1000 || rc=1
  run1 mlp "$f/data/mlp.main.out0.npy" "$f/mlp.so" main -i "$f/data/mlp.main.in0.npy" || rc=1
  run1 cnn "$f/data/cnn.main.out0.npy" "$f/cnn.so" main -i "$f/data/cnn.main.in0.npy" || rc=1
  return $rc
}

say "== Vulkan suite on this machine's driver (issue 34); DIR $dir, repository $repo"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$log"
step setup setup
if [ "${results[-1]:0:4}" = PASS ]; then
  step device with_env device
  step "tests (push descriptors where the driver has them)" \
    with_env suite "TVMRT_TEST_VULKAN_DEVICE=$expect"
  step "tests (descriptor sets: TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1)" \
    with_env suite TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1 "TVMRT_TEST_VULKAN_DEVICE=$expect,sets"
  if [ -x "$work/bin/tvmrt" ]; then
    step "tool (add_scale, Relax MLP and CNN)" with_env tool
  else
    say "SKIP tool: no tvmrt in $dir/bin.tar.xz"
  fi
fi
say "== summary ($(($(date +%s) - t0)) s; device: $(cat "$work/device.name" 2>/dev/null || echo '?'))"
for r in "${results[@]}"; do say "  $r"; done
if [ $failed -eq 0 ]; then say "ALL PASS"; else say "FAILED"; fi
echo "log: $log"
exit $failed
