//! `tvmrt run`: call a function once on `.npy` inputs; save or summarize the outputs.

use std::path::PathBuf;

use crate::invoke::{describe, output_path, CallArgs, Prepared, Value};
use crate::npyio::{stats, write_npy, HostArray};

/// Arguments of `tvmrt run`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    tvmrt run add.so add -i a.npy -i b.npy -o float32:16\n  \
    tvmrt run model.so main -i x.npy --save out/\n  \
    tvmrt run classic.so add_one -i int:41\n\n\
    A compiled kernel takes its outputs as extra arguments (destination passing): give each \
    one's dtype and shape with --output-shape, in order. A Relax model's functions return \
    their outputs.")]
pub struct Args {
    #[command(flatten)]
    pub call: CallArgs,

    /// Write the outputs to DIR/output0.npy, output1.npy, ... instead of summarizing them.
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
}

/// `min 0.1 max 2 mean 1.05 [0.5, 1.2, ...]`.
fn summary(a: &HostArray) -> String {
    let Some(s) = stats(a) else {
        return String::new();
    };
    if s.count == 0 {
        return "(empty)".into();
    }
    let mut text = format!(
        "min {}  max {}  mean {}",
        fmt(s.min),
        fmt(s.max),
        fmt(s.mean)
    );
    if s.nans > 0 {
        text.push_str(&format!("  nan {}", s.nans));
    }
    let head: Vec<String> = s.head.iter().map(|&v| fmt(v)).collect();
    let more = if s.count > s.head.len() { ", ..." } else { "" };
    text.push_str(&format!("  [{}{more}]", head.join(", ")));
    text
}

/// A value with 6 significant digits, without trailing zeros.
fn fmt(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let mag = v.abs();
    if (1e-4..1e6).contains(&mag) {
        let decimals = (5 - mag.log10().floor() as i32).clamp(0, 9) as usize;
        let text = format!("{v:.decimals$}");
        return text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{v:.5e}")
}

/// Runs `tvmrt run`.
pub fn main(args: Args) -> tvmrt::Result<()> {
    let p = Prepared::new(&args.call)?;
    let returned = p.call()?;
    let outputs = p.collect(returned)?;
    let n_in = p.num_inputs();
    match &args.save {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                tvmrt::Error::runtime(format!("cannot create `{}`: {e}", dir.display()))
            })?;
            for (n, o) in outputs.iter().enumerate() {
                match o {
                    Value::Array(a) => {
                        let path = output_path(dir, n);
                        write_npy(&path, a)?;
                        println!("wrote {} ({})", path.display(), describe(a.dtype, &a.shape));
                    }
                    Value::Scalar(text, ty) => println!("output{n}: {text} ({ty}, not saved)"),
                }
            }
        }
        None => {
            println!(
                "{} `{}` ({}): {n_in} input(s), {} output(s)",
                args.call.library,
                p.function,
                p.kind(),
                outputs.len()
            );
            for (n, o) in outputs.iter().enumerate() {
                match o {
                    Value::Array(a) => {
                        println!("output{n}: {}  {}", describe(a.dtype, &a.shape), summary(a))
                    }
                    Value::Scalar(text, ty) => println!("output{n}: {text} ({ty})"),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fmt;

    #[test]
    fn number_format() {
        assert_eq!(fmt(2.0), "2");
        assert_eq!(fmt(-3.0), "-3");
        assert_eq!(fmt(0.5), "0.5");
        assert_eq!(fmt(1.234567891), "1.23457");
        assert_eq!(fmt(123.456789), "123.457");
        assert_eq!(fmt(1e-7), "1.00000e-7");
        assert_eq!(fmt(f64::NAN), "nan");
    }
}
