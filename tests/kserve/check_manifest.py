"""Checks docs/kserve/tvmrt-runtime.yaml as Kubernetes would take it.

- The ClusterServingRuntime validates against KServe's own CRD schema
  (conformance/kserve/serving.kserve.io_clusterservingruntimes.yaml), strictly: a field the
  schema does not name is an error, as with kubeconform's -strict (the API server would drop
  it silently).
- The InferenceService asks for a model format and protocol the runtime supports.
- Every flag the runtime passes to `tvmrt serve` is one the tool accepts (its --help).

    python tests/kserve/check_manifest.py TVMRT_BINARY
"""

import copy
import pathlib
import subprocess
import sys

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "conformance/kserve/serving.kserve.io_clusterservingruntimes.yaml"
MANIFEST = ROOT / "docs/kserve/tvmrt-runtime.yaml"


def strict(schema):
    """The schema with unknown fields refused wherever the CRD does not keep them."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def crd_schema(version):
    crd = yaml.safe_load(CRD.read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return strict(v["schema"]["openAPIV3Schema"])
    raise SystemExit(f"{CRD.name} has no version {version}")


def flags_of(args):
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def main():
    tvmrt = sys.argv[1]
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    runtimes = [d for d in docs if d["kind"] == "ClusterServingRuntime"]
    services = [d for d in docs if d["kind"] == "InferenceService"]
    assert len(runtimes) == 1 and len(services) == 1, "one runtime and one InferenceService"
    runtime = runtimes[0]
    group, version = runtime["apiVersion"].split("/")
    assert group == "serving.kserve.io", runtime["apiVersion"]
    errors = sorted(
        jsonschema.Draft7Validator(crd_schema(version)).iter_errors(runtime),
        key=lambda e: list(e.path),
    )
    for e in errors:
        print(f"{'.'.join(map(str, e.path))}: {e.message}")
    assert not errors, f"{len(errors)} schema error(s)"
    # A field the schema lacks is caught: the check itself is live.
    broken = copy.deepcopy(runtime)
    broken["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    assert list(jsonschema.Draft7Validator(crd_schema(version)).iter_errors(broken))

    spec = runtime["spec"]
    predictor = services[0]["spec"]["predictor"]["model"]
    formats = {f["name"] for f in spec["supportedModelFormats"]}
    assert predictor["modelFormat"]["name"] in formats, predictor
    assert predictor["protocolVersion"] in spec["protocolVersions"], predictor

    container = spec["containers"][0]
    assert container["command"] == ["tvmrt"] and container["args"][0] == "serve"
    helptext = subprocess.run(
        [tvmrt, "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    missing = [f for f in flags_of(container["args"][1:]) if f not in helptext]
    assert not missing, f"tvmrt serve does not accept {missing}"
    print(f"{MANIFEST.relative_to(ROOT)}: valid ClusterServingRuntime ({version}), flags accepted")


if __name__ == "__main__":
    main()
