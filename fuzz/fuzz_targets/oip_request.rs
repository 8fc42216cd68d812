//! Fuzz target: inference requests as clients send them to `tvmrt serve --model-repository`,
//! through the server's own code from the body to the encoded answer.
//!
//! Input: a first byte that picks the front, then the request.
//! - 0: an HTTP body of JSON alone (`infer::decode_request`);
//! - 1: Triton's binary extension: two bytes of `Inference-Header-Content-Length`, then the body;
//! - 2: a gRPC `ModelInferRequest` (prost, then `grpc::decode`);
//! - 3: a gzip body, 4: a deflate body (`compression::decompress` under a 1 MiB limit), then
//!   read as 0.
//!
//! A request that decodes goes twice (so that it stacks into a batch of two) through
//! `tvmrt_models::execute`, the checks, batching and output splitting the Triton backend
//! shares, on stand-in models of each kind, and each answer is encoded as the HTTP front
//! encodes it. Checked besides "no crash": a refusal is a 400 with a message; a decoded
//! tensor's bytes are what its shape and type say; no model is handed a tensor its bytes do
//! not fill; every request is answered exactly once; outputs are as large as their shapes; an
//! encoded answer's JSON parses and its binary tail is the binary outputs' bytes. Nothing may
//! be sized by a length or shape the client claims (libFuzzer's malloc limit fails the run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tvmrt::dtype::dtypes::{FLOAT32, INT64, UINT8};
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt_models::request::{Run, Stats, Timing};
use tvmrt_models::{execute, Dim, ModelView, TensorSpec};
use tvmrt_oip::codec::{check_size, element_count};
use tvmrt_oip::compression::{decompress, Coding};
use tvmrt_oip::grpc::{self, pb::ModelInferRequest};
use tvmrt_oip::infer::{self, decode_request, InferRequest};
use tvmrt_oip::job::Job;

fuzz_target!(|data: &[u8]| {
    let Some((&front, body)) = data.split_first() else {
        return;
    };
    let decoded = match front % 5 {
        0 => decode_request(body, None),
        1 => {
            let Some((length, body)) = body.split_first_chunk::<2>() else {
                return;
            };
            decode_request(body, Some(u16::from_le_bytes(*length) as usize))
        }
        2 => match ModelInferRequest::decode(body) {
            Ok(message) => grpc::decode(message),
            Err(_) => return,
        },
        coded => {
            let coding = if coded == 3 {
                Coding::Gzip
            } else {
                Coding::Deflate
            };
            match decompress(coding, body, 1 << 20) {
                Ok(plain) => {
                    assert!(plain.len() <= 1 << 20, "decompressed past the limit");
                    decode_request(&plain, None)
                }
                Err(e) => {
                    assert!(e.status.is_client_error() && !e.message.is_empty());
                    return;
                }
            }
        }
    };
    let request = match decoded {
        Ok(r) => r,
        Err(e) => {
            assert_eq!(e.status, 400, "{}", e.message);
            assert!(!e.message.is_empty());
            return;
        }
    };
    for t in &request.inputs {
        let count = element_count(&t.shape).expect("a decoded shape counts");
        if request.shm_inputs.iter().any(|(n, _)| *n == t.name) {
            assert!(
                t.data.is_empty(),
                "an input in shared memory came with bytes"
            );
        } else {
            check_size(&t.data, t.datatype, count).expect("a decoded tensor fills its shape");
        }
    }
    for model in models() {
        run(&model, &request);
    }
});

/// The stand-in models: a batched one as the Triton tests' MLP takes its input, an unbatched
/// kernel of two inputs, and a batched model of two types whose second output has a wrong
/// first dimension (the split must refuse it).
fn models() -> [ModelView<'static>; 3] {
    fn spec(name: &str, dtype: tvmrt::abi::DLDataType, dims: &[&str]) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dtype,
            dims: dims
                .iter()
                .map(|d| match d.parse() {
                    Ok(n) => Dim::Fixed(n),
                    Err(_) => Dim::Var((*d).into()),
                })
                .collect(),
        }
    }
    fn leak(specs: Vec<TensorSpec>) -> &'static [TensorSpec] {
        // Once per process: the models are the same for every input.
        Box::leak(specs.into_boxed_slice())
    }
    use std::sync::OnceLock;
    static SPECS: OnceLock<[&'static [TensorSpec]; 3]> = OnceLock::new();
    let [mlp, kernel, two] = *SPECS.get_or_init(|| {
        [
            leak(vec![spec("x", FLOAT32, &["n", "2"])]),
            leak(vec![spec("A", FLOAT32, &["m"]), spec("B", FLOAT32, &["m"])]),
            leak(vec![
                spec("x", INT64, &["n", "k"]),
                spec("y", UINT8, &["n"]),
            ]),
        ]
    });
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
    [
        ModelView {
            inputs: mlp,
            output_names: names(&["output0"]),
            batched: true,
        },
        ModelView {
            inputs: kernel,
            output_names: names(&["output0"]),
            batched: false,
        },
        ModelView {
            inputs: two,
            output_names: names(&["output0", "output1"]),
            batched: true,
        },
    ]
}

/// Runs `request` twice as one call of `model`, and checks and encodes the answers.
fn run(model: &ModelView<'_>, request: &InferRequest) {
    let jobs: Vec<_> = (0..2).map(|_| Job::new(request.clone(), None)).collect();
    let (jobs, mut answers): (Vec<Job>, Vec<_>) = jobs.into_iter().unzip();
    execute(&StandIn { model }, model, &jobs, &NoStats);
    for answer in &mut answers {
        let outputs = match answer.try_recv().expect("every request is answered") {
            Ok(outputs) => outputs,
            Err(message) => {
                assert!(!message.is_empty());
                continue;
            }
        };
        for t in &outputs {
            let count = element_count(&t.shape).expect("an output's shape counts");
            check_size(&t.data, t.datatype, count).expect("an output fills its shape");
        }
        let encoded = infer::encode_response("m", "1", request, &outputs);
        let json_len = encoded.header_length.unwrap_or(encoded.body.len());
        let head: serde_json::Value =
            serde_json::from_slice(&encoded.body[..json_len]).expect("the answer's JSON parses");
        let binary: usize = head["outputs"]
            .as_array()
            .expect("outputs")
            .iter()
            .filter_map(|o| o["parameters"]["binary_data_size"].as_u64())
            .sum::<u64>() as usize;
        assert_eq!(encoded.body.len() - json_len, binary, "the binary tail");
    }
}

/// A model that reads every byte of its inputs and returns the first as `output0` (and, for
/// two outputs, a second of one row too many); a first element of 13 (float32 or int64) fails
/// the call, so that a failing batch is rerun request by request.
struct StandIn<'m> {
    model: &'m ModelView<'m>,
}

impl Run for StandIn<'_> {
    fn run(&self, inputs: &[Tensor]) -> tvmrt::Result<Vec<Tensor>> {
        assert_eq!(inputs.len(), self.model.inputs.len());
        let mut first = Vec::new();
        for (t, spec) in inputs.iter().zip(self.model.inputs) {
            assert_eq!(t.dtype(), spec.dtype);
            let bytes = t.to_vec()?;
            assert_eq!(bytes.len(), t.nbytes(), "a tensor its bytes do not fill");
            if first.is_empty() {
                first = bytes;
            }
        }
        if first.starts_with(&13f32.to_le_bytes()) || first.starts_with(&13i64.to_le_bytes()) {
            return Err(tvmrt::Error::value("unlucky 13"));
        }
        let x = &inputs[0];
        let out = Tensor::empty(x.shape(), x.dtype(), cpu())?;
        out.copy_from_bytes(&first)?;
        let mut outputs = vec![out];
        if self.model.output_names.len() == 2 {
            let rows = x.shape().first().copied().unwrap_or(0);
            outputs.push(Tensor::empty(&[rows + 1], UINT8, cpu())?);
        }
        Ok(outputs)
    }
}

struct NoStats;

impl<R> Stats<R> for NoStats {
    fn request(&self, _: &R, _: bool, _: u64, _: Timing, _: u64) {}
    fn batch(&self, _: u64, _: u64, _: Timing, _: u64) {}
}
