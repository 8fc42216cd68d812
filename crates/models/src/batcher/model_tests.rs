//! The whole path a server outside Triton takes, on a real model (the Triton tests'
//! `batch_mlp`, `x: float32[n, 16] -> float32[n, 8]`): `config.pbtxt` parsed, the model opened,
//! its configuration completed and checked, two instances started on it, and single-row
//! requests joined into batches whose outputs equal TVM 0.27's recorded ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{executors, Batcher, BatcherConfig, ModelSpec};
use crate::testing::{answer, job, stats_when, Answer};
use crate::{config, load, pbtxt};

const CONFIG: &str = r#"
backend: "tvmrt"
instance_group [{ kind: KIND_CPU, count: 2 }]
dynamic_batching { max_queue_delay_microseconds: 300000 }
"#;

/// A repository holding `batch_mlp` version 1; removed when dropped.
struct Repository(PathBuf);

impl Repository {
    fn new() -> Repository {
        let root = std::env::temp_dir().join(format!("tvmrt_models_{}", std::process::id()));
        let version = root.join("batch_mlp").join("1");
        std::fs::create_dir_all(&version).unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../triton/tests/models/batch_mlp.so");
        std::fs::copy(fixture, version.join("model.so")).unwrap();
        Repository(root)
    }
}

impl Drop for Repository {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A matrix as its rows.
type Rows = Vec<Vec<f32>>;

/// TVM's recorded cases: each an input `[n, 16]` and its output `[n, 8]`.
fn recorded() -> Vec<(Rows, Rows)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../triton/tests/models/batch_mlp.expected.json");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rows = |v: &Value| -> Rows {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect()
    };
    rec["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (rows(&c["x"]), rows(&c["y"])))
        .collect()
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            "{got:?} != {want:?}"
        );
    }
}

#[test]
fn a_repository_model_served_in_batches_equals_tvm() {
    let repo = Repository::new();
    let mut config = pbtxt::parse(CONFIG).unwrap();
    let loaded = load::open("batch_mlp", &repo.0.join("batch_mlp/1"), &config, true).unwrap();
    assert!(load::complete(&mut config, &loaded));
    let served = load::finish(&loaded, &config).unwrap();
    assert!(served.batched && served.warnings.is_empty());
    assert_eq!(served.settings.max_batch_size, 8);
    let batching = BatcherConfig::from_config(&config);
    assert_eq!((batching.instances, batching.max_batch_size), (2, 8));
    let spec = ModelSpec::of(&loaded, &served);
    let make = executors(Arc::new(loaded), config::instance_gpus(&config));
    let b = Batcher::start("batch_mlp", spec, batching, make).unwrap();

    let cases = recorded();
    // Every recorded row as its own request: one batch of them all (within the delay).
    let rows: Vec<(&Vec<f32>, &Vec<f32>)> =
        cases.iter().flat_map(|(x, y)| x.iter().zip(y)).collect();
    let answers: Vec<(Answer, &Vec<f32>)> = rows
        .iter()
        .map(|(x, y)| {
            let (j, a) = job(&[1, 16], x);
            b.submit(j).map_err(|e| e.0).unwrap();
            (a, *y)
        })
        .collect();
    for (a, y) in &answers {
        assert_close(&answer(a).unwrap(), y);
    }
    // A request of several rows is split back whole.
    let (x, y) = cases.iter().find(|c| c.0.len() > 1).unwrap();
    let (j, a) = job(&[x.len() as i64, 16], &x.concat());
    b.submit(j).map_err(|e| e.0).unwrap();
    assert_close(&answer(&a).unwrap(), &y.concat());

    let n = rows.len() as u64;
    let stats = stats_when(&b, |s| s.execution_count == 2);
    assert_eq!(stats.inference_count, n + x.len() as u64);
    let sizes: Vec<u64> = stats.batches.keys().copied().collect();
    assert!(
        sizes.contains(&n),
        "batch sizes {sizes:?}, expected one of {n}"
    );
    b.drain();
    assert_eq!(stats.fail.count, 0);
}
