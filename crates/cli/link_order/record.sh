#!/usr/bin/env bash
# Records link_order/tvmrt.order: the functions `tvmrt serve --model-repository` runs (start-up,
# model loading, HTTP and gRPC requests of the serving benchmark, benches/serve_oip), as
# callgrind sees them in the release tool, which build.rs then asks LLD to lay side by side.
# Run it again after a toolchain or dependency update, and after changing the server's code
# (symbol names carry hashes: of their crate, and of the types a generic function was made
# for; names the new build lacks are skipped, and the gain fades).
#
#   crates/cli/link_order/record.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
source .ci/lib.sh
command -v valgrind >/dev/null || apt_install valgrind
cargo build --release --quiet -p tvmrt-cli
tool=$(cargo metadata --format-version 1 --no-deps | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/tvmrt
python=$(.ci/venv.sh triton_bench)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The benchmark's models and configurations (benches/triton/run.py), built by TVM.
"$python" - "$work/repo" <<'PY'
import os, sys
sys.path.insert(0, os.path.join("benches", "triton"))
import run as bench
repo = sys.argv[1]
for name, (builder, _) in bench.MODELS.items():
    lib = os.path.join(os.path.dirname(repo), f"{name}.so")
    bench.generate.build(builder(), lib)
    bench.triton.add_model(repo, name, lib, bench.tvmrt_config(1))
PY
read -r http grpc < <("$python" -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
  "$tool" serve --model-repository "$work/repo" --host 127.0.0.1 --port "$http" \
  --grpc-port "$grpc" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$http/v2/models/mlp/ready" >/dev/null &&
    curl -sf "http://127.0.0.1:$http/v2/models/cnn/ready" >/dev/null; then break; fi
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.2
done
"$python" "$here/drive.py" "$http" "$grpc" mlp:256 cnn:3x32x32 || { kill "$server"; exit 1; }
kill -TERM "$server"
wait "$server" || true
python3 "$here/functions.py" "$work/callgrind.out" "$tool" >"$here/tvmrt.order"
echo "$(wc -l <"$here/tvmrt.order") functions in $here/tvmrt.order"
