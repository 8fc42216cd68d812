//! Errors on one line: kernel and loader messages joined, and the argument or parameter a
//! TVM error names.

use tvmrt::Error;

use super::args::OutputSpec;

/// 1-based, human label of argument `k` (TVM numbers arguments from 0).
pub(super) fn arg_label(k: usize, inputs: &[String], outputs: &[OutputSpec]) -> String {
    if k < inputs.len() {
        format!("input {} (`{}`)", k + 1, inputs[k])
    } else if let Some(o) = outputs.get(k - inputs.len()) {
        format!(
            "output {} (--output-shape {})",
            k - inputs.len() + 1,
            o.text
        )
    } else {
        format!("argument {}", k + 1)
    }
}

/// Joins a multi-line message (TVM's argument errors span three lines) into one line.
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The argument index in a TVM argument error (`... on argument #1 when calling ...`).
pub(super) fn failing_argument(message: &str) -> Option<usize> {
    let rest = &message[message.find("argument #")? + "argument #".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The parameter index in a Relax VM error (`ErrorContext(fn=main, loc=param[0], ...)`).
pub(super) fn failing_param(message: &str) -> Option<usize> {
    let rest = &message[message.find("loc=param[")? + "loc=param[".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A load error on one line, naming the file.
pub(super) fn load_error(path: &str, e: Error) -> Error {
    let msg = one_line(&e.message);
    let msg = if msg.contains(path) {
        msg
    } else {
        format!("loading `{path}`: {msg}")
    };
    Error::new(e.kind.clone(), msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_messages_become_one_line() {
        let m = "Mismatched B.shape[0] on argument #1 when calling:\n  `add(A: Tensor([n], float32))`,\n  expected 4";
        assert_eq!(
            one_line(m),
            "Mismatched B.shape[0] on argument #1 when calling: `add(A: Tensor([n], float32))`, expected 4"
        );
        assert_eq!(failing_argument(m), Some(1));
        assert_eq!(failing_argument("Expected 3 arguments"), None);
        assert_eq!(
            failing_param("Check failed: ErrorContext(fn=main, loc=param[2], param=x) mismatch"),
            Some(2)
        );
    }
}
