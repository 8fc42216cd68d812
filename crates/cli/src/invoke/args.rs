//! A call as the command line describes it (shared by `run` and `bench`): the library, the
//! function, the inputs, the outputs to allocate and the device.

use std::str::FromStr;

use tvmrt::abi::{DLDataType, DLDevice};
use tvmrt::dtype::dtype_from_str;

/// A call described on the command line (shared by `run` and `bench`).
#[derive(clap::Args, Clone, Debug)]
pub struct CallArgs {
    /// The library (`.so` exported by TVM) or module file to load.
    pub library: String,

    /// The function to call: a compiled kernel, or a function of a Relax model (`main`).
    pub function: String,

    /// An input: a `.npy` file, or a scalar `int:N`, `float:X`, `bool:true`, `str:TEXT`;
    /// repeat in argument order.
    #[arg(short = 'i', long = "input", value_name = "X.npy")]
    pub inputs: Vec<String>,

    /// An output tensor a destination-passing kernel writes, `DTYPE:D0xD1...` (e.g.
    /// `float32:16`, `int8:4x4`); repeat in order. Passed after the inputs.
    #[arg(short = 'o', long = "output-shape", value_name = "DTYPE:D0xD1...")]
    pub output_shapes: Vec<OutputSpec>,

    /// Threads for parallel kernels (default: `TVM_NUM_THREADS`, else the core count).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// The file's format when its extension does not tell (`so`, or a registered loader's).
    #[arg(long, value_name = "FMT")]
    pub format: Option<String>,

    /// The device to run on: `cpu` (the default), or `opencl[:N]` / `cuda[:N]` / `vulkan[:N]`
    /// for a library built for OpenCL / CUDA / Vulkan. Inputs are uploaded to it, outputs
    /// copied back.
    #[arg(long, value_name = "DEVICE", default_value = "cpu", value_parser = parse_device)]
    pub device: DLDevice,
}

fn parse_device(text: &str) -> std::result::Result<DLDevice, String> {
    let dev = tvmrt::device::parse_device(text).map_err(|e| e.message.clone())?;
    tvmrt::device::api_of(dev).map_err(|e| e.message.clone())?;
    Ok(dev)
}

/// An output tensor's dtype and shape (`float32:4x4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSpec {
    /// The dtype.
    pub dtype: DLDataType,
    /// The shape.
    pub shape: Vec<i64>,
    /// As written.
    pub text: String,
}

impl FromStr for OutputSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (dt, dims) = s.split_once(':').ok_or_else(|| {
            format!("`{s}` is not DTYPE:D0xD1... (e.g. float32:16 or float32:4x4)")
        })?;
        let dtype = dtype_from_str(dt.trim()).map_err(|e| format!("`{s}`: {}", e.message))?;
        if dtype.bits == 0 || dtype.lanes == 0 {
            return Err(format!("`{s}`: `{dt}` is not a tensor element type"));
        }
        let dims = dims.trim();
        if dims.is_empty() {
            return Err(format!(
                "`{s}` has no shape after the colon (e.g. {dt}:16 or {dt}:4x4)"
            ));
        }
        let shape = dims
            .split(['x', 'X', ','])
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&v| v >= 0)
                    .ok_or_else(|| {
                        format!("`{s}`: `{d}` is not a dimension (a non-negative integer)")
                    })
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(OutputSpec {
            dtype,
            shape,
            text: s.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvmrt::dtype::dtypes;

    #[test]
    fn output_specs() {
        let s: OutputSpec = "float32:4x4".parse().unwrap();
        assert_eq!(
            (s.dtype, s.shape.as_slice()),
            (dtypes::FLOAT32, &[4i64, 4][..])
        );
        let s: OutputSpec = "int8:16".parse().unwrap();
        assert_eq!((s.dtype, s.shape.as_slice()), (dtypes::INT8, &[16i64][..]));
        assert!("float32"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("DTYPE:D0xD1"));
        assert!("float32:"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("no shape"));
        assert!("float32:4x-1"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("`-1`"));
        assert!("floaty:4"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("floaty"));
    }
}
