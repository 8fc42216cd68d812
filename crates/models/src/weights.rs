//! A Relax model's weights kept out of its library, in a tensor cache directory
//! (`tensor-cache.json` and its shards: MLC-LLM's format, which TVM's
//! `tvm.contrib.tvmjs.dump_tensor_cache` writes), and which parameters of the served function
//! they fill. The rest of the parameters are the model's inputs.
//!
//! Two ways of taking weights are served, those of TVM's exporters:
//! - by name: each tensor parameter named like a record of the cache takes that record
//!   (`main(x, w1, b1, ...)`, a model imported with its parameters as inputs and split off with
//!   `relax.frontend.detach_params`, its cache written with the parameters' names);
//! - packed: a tuple parameter takes the whole cache as a tuple (`main(x, packed_params)`,
//!   `relax.frontend.nn`'s `param_mode="packed"`, every MLC-LLM model), in the order the
//!   model's `_metadata` function lists under `params` (as MLC-LLM's engine reads it), else the
//!   order of `tensor-cache.json`.

use std::path::Path;

use tvmrt::abi::DLDevice;
use tvmrt::tensor::Tensor;
use tvmrt::{Error, Result};

use crate::signature::{dim_text, not_a_tensor, Dim, RelaxParam, TensorSpec};

/// Where each argument of the served function comes from.
#[derive(Clone)]
pub enum Slot {
    /// The model's input `k` (a request's tensor).
    Input(usize),
    /// One weight.
    Weight(Tensor),
    /// A tuple of weights.
    Packed(Vec<Tensor>),
}

/// A tensor cache directory read into memory (CPU), in its file order.
pub struct Weights {
    /// The directory, for messages.
    pub dir: String,
    /// Each record's name and tensor.
    pub tensors: Vec<(String, Tensor)>,
}

impl Weights {
    /// Reads every tensor of `dir`; a missing or corrupt cache is an error naming it.
    pub fn read(dir: &Path, device: DLDevice) -> Result<Weights> {
        let shown = dir.display().to_string();
        if !dir.is_dir() {
            return Err(Error::value(format!(
                "the weights directory `{shown}` does not exist"
            )));
        }
        let tensors = tvmrt::llm::tensor_cache::read(dir, device)
            .map_err(|e| e.context(format!("the weights in `{shown}`")))?;
        Ok(Weights {
            dir: shown,
            tensors,
        })
    }

    fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.0 == name).map(|t| &t.1)
    }
}

/// `float32[16, 32]`.
fn describe_tensor(t: &Tensor) -> String {
    let dtype = tvmrt::dtype::dtype_to_string(t.dtype()).unwrap_or_else(|_| "?".into());
    let dims: Vec<String> = t.shape().iter().map(i64::to_string).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

/// Checks a weight against the parameter (or tuple element) it fills: dtype, rank and fixed
/// sizes; symbolic sizes (an MLC model's `vocab_size`) take what the weight has.
fn check_weight(name: &str, t: &Tensor, spec: &TensorSpec, func: &str, dir: &str) -> Result<()> {
    let fits = t.dtype() == spec.dtype
        && t.shape().len() == spec.dims.len()
        && spec
            .dims
            .iter()
            .zip(t.shape())
            .all(|(d, &v)| !matches!(d, Dim::Fixed(w) if *w != v));
    if fits {
        return Ok(());
    }
    let dims: Vec<String> = spec.dims.iter().map(dim_text).collect();
    Err(Error::value(format!(
        "weight `{name}` in `{dir}` is {}, but `{func}` takes `{}` as {}[{}]",
        describe_tensor(t),
        spec.name,
        tvmrt::dtype::dtype_to_string(spec.dtype).unwrap_or_else(|_| "?".into()),
        dims.join(", ")
    )))
}

/// Assigns the parameters of `func`: weights by name and packed (see the module's comment),
/// the rest inputs, which must be tensors. `order`: the names `_metadata` lists, for a tuple.
/// Returns the inputs and one slot per parameter.
pub fn bind(
    func: &str,
    params: Vec<RelaxParam>,
    weights: Option<&Weights>,
    order: Option<&[String]>,
) -> Result<(Vec<TensorSpec>, Vec<Slot>)> {
    let mut inputs = Vec::new();
    let mut slots = Vec::with_capacity(params.len());
    let mut used = false;
    for (k, p) in params.into_iter().enumerate() {
        match (p, weights) {
            (RelaxParam::Tensor(spec), Some(w)) if w.get(&spec.name).is_some() => {
                let t = w.get(&spec.name).unwrap();
                check_weight(&spec.name, t, &spec, func, &w.dir)?;
                slots.push(Slot::Weight(t.clone()));
                used = true;
            }
            // TVM records no annotation for the parameters past a function's `num_input`
            // (the weights of `detach_params`): the kernels check those at the call.
            (RelaxParam::Other { name, text }, Some(w))
                if text.is_empty() && w.get(&name).is_some() =>
            {
                slots.push(Slot::Weight(w.get(&name).unwrap().clone()));
                used = true;
            }
            (RelaxParam::Tensor(spec), _) => {
                slots.push(Slot::Input(inputs.len()));
                inputs.push(spec);
            }
            (RelaxParam::Tuple { name, elements, .. }, Some(w)) => {
                let tensors: Vec<(String, Tensor)> = match order {
                    Some(names) => names
                        .iter()
                        .map(|n| {
                            w.get(n).map(|t| (n.clone(), t.clone())).ok_or_else(|| {
                                Error::value(format!(
                                    "the weights in `{}` have no `{n}`, which the model's \
                                     `_metadata` lists",
                                    w.dir
                                ))
                            })
                        })
                        .collect::<Result<_>>()?,
                    None => w.tensors.clone(),
                };
                if tensors.len() != elements.len() {
                    return Err(Error::value(format!(
                        "`{name}` of `{func}` is a tuple of {} tensors, but `{}` holds {}{}",
                        elements.len(),
                        w.dir,
                        tensors.len(),
                        if order.is_some() {
                            " of the names `_metadata` lists"
                        } else {
                            ""
                        }
                    )));
                }
                for ((n, t), spec) in tensors.iter().zip(&elements) {
                    if let Some(spec) = spec {
                        check_weight(n, t, spec, func, &w.dir)?;
                    }
                }
                slots.push(Slot::Packed(tensors.into_iter().map(|t| t.1).collect()));
                used = true;
            }
            (other, _) => return Err(not_a_tensor(func, k, &other)),
        }
    }
    if let Some(w) = weights {
        if !used {
            return Err(Error::value(format!(
                "`{func}` takes none of the weights in `{}`: no parameter is named like one of \
                 them and none is a tuple",
                w.dir
            )));
        }
    }
    Ok((inputs, slots))
}

/// The `params` names of a model's `_metadata` JSON (MLC-LLM's:
/// `{"params": [{"name": ..., "shape": ..., "dtype": ...}, ...], ...}`), if it lists them.
pub fn metadata_param_names(json: &str) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("params")?
        .as_array()?
        .iter()
        .map(|p| p.get("name")?.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvmrt::dtype::dtypes::FLOAT32;
    use tvmrt::tensor::layout::cpu;

    fn spec(name: &str, dims: &[i64]) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dtype: FLOAT32,
            dims: dims.iter().map(|&d| Dim::Fixed(d)).collect(),
        }
    }

    fn weights(entries: &[(&str, &[i64])]) -> Weights {
        Weights {
            dir: "w/".into(),
            tensors: entries
                .iter()
                .map(|(n, s)| (n.to_string(), Tensor::empty(s, FLOAT32, cpu()).unwrap()))
                .collect(),
        }
    }

    fn failed(r: Result<(Vec<TensorSpec>, Vec<Slot>)>) -> Error {
        match r {
            Ok(_) => panic!("the parameters were bound"),
            Err(e) => e,
        }
    }

    #[test]
    fn by_name_and_packed() {
        let w = weights(&[("w1", &[4, 2]), ("b1", &[2])]);
        let x = RelaxParam::Tensor(TensorSpec {
            name: "x".into(),
            dtype: FLOAT32,
            dims: vec![Dim::Var("n".into()), Dim::Fixed(4)],
        });
        let params = vec![
            x.clone(),
            RelaxParam::Tensor(spec("w1", &[4, 2])),
            RelaxParam::Tensor(spec("b1", &[2])),
        ];
        let (inputs, slots) = bind("main", params, Some(&w), None).unwrap();
        assert_eq!(inputs.len(), 1);
        assert!(matches!(
            slots[..],
            [Slot::Input(0), Slot::Weight(_), Slot::Weight(_)]
        ));

        let wrong = vec![x.clone(), RelaxParam::Tensor(spec("w1", &[4, 3]))];
        let e = failed(bind("main", wrong, Some(&w), None));
        assert_eq!(
            e.message,
            "weight `w1` in `w/` is float32[4, 2], but `main` takes `w1` as float32[4, 3]"
        );

        let tuple = |n: usize| RelaxParam::Tuple {
            name: "params".into(),
            elements: vec![Some(spec("params[0]", &[4, 2])), None, None][..n].to_vec(),
            text: "R.Tuple(...)".into(),
        };
        let (_, slots) = bind("main", vec![x.clone(), tuple(2)], Some(&w), None).unwrap();
        assert!(matches!(&slots[1], Slot::Packed(t) if t.len() == 2));
        let order = ["b1".to_string(), "w1".to_string()];
        let e = failed(bind(
            "main",
            vec![x.clone(), tuple(2)],
            Some(&w),
            Some(&order),
        ));
        assert!(
            e.message.contains("weight `b1` in `w/` is float32[2]"),
            "{e}"
        );
        let e = failed(bind("main", vec![x.clone(), tuple(3)], Some(&w), None));
        assert_eq!(
            e.message,
            "`params` of `main` is a tuple of 3 tensors, but `w/` holds 2"
        );
        let e = failed(bind("main", vec![x.clone(), tuple(2)], None, None));
        assert!(e.message.contains("parameter 1 (`params`)"), "{e}");
        let unannotated = RelaxParam::Other {
            name: "b1".into(),
            text: String::new(),
        };
        let (_, slots) = bind("main", vec![x.clone(), unannotated], Some(&w), None).unwrap();
        assert!(matches!(slots[1], Slot::Weight(_)));
        let e = failed(bind("main", vec![x], Some(&w), None));
        assert!(e.message.contains("takes none of the weights"), "{e}");
    }

    #[test]
    fn metadata_names() {
        let names = metadata_param_names(r#"{"params": [{"name": "a"}, {"name": "b"}]}"#);
        assert_eq!(names, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(metadata_param_names(r#"{"kv": 1}"#), None);
        assert_eq!(metadata_param_names("nope"), None);
    }
}
