//! The server's log, with Triton's logging extension: lines of severity info, warning, error
//! and verbose levels, in Triton's `default` format (`I1203 07:51:02.123456 4242
//! repository.rs:161] message`) or `ISO8601` (`2026-12-03T07:51:02Z I 4242 repository.rs:161]
//! message`), to stderr or `--log-file`. `GET/POST /v2/logging` and gRPC `LogSettings` read and
//! change what is logged while the server runs; the file is set at start only (as Triton: a
//! client never chooses where the server writes).

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Map, Value};

/// How a line starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `I1203 07:51:02.123456 PID FILE:LINE] `.
    Default,
    /// `2026-12-03T07:51:02Z I PID FILE:LINE] `.
    Iso8601,
}

impl Format {
    /// The format named `name` (`default` or `ISO8601`, Triton's names).
    pub fn parse(name: &str) -> Result<Format, String> {
        match name {
            "default" => Ok(Format::Default),
            "ISO8601" => Ok(Format::Iso8601),
            other => Err(format!(
                "log_format must be \"default\" or \"ISO8601\", not \"{other}\""
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Default => "default",
            Format::Iso8601 => "ISO8601",
        }
    }
}

/// What is logged, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    /// The file lines are appended to (`None`: stderr).
    pub file: Option<PathBuf>,
    /// Info lines (models loaded and unloaded, shutdown).
    pub info: bool,
    /// Warnings.
    pub warning: bool,
    /// Errors (a model that fails to load, a connection not accepted).
    pub error: bool,
    /// Verbose lines up to this level (1: a line per inference request; 2: its outcome too).
    pub verbose: u32,
    /// The line format.
    pub format: Format,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            file: None,
            info: true,
            warning: true,
            error: true,
            verbose: 0,
            format: Format::Default,
        }
    }
}

/// A line's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// `I`.
    Info,
    /// `W`.
    Warning,
    /// `E`.
    Error,
    /// `I`, shown up to the verbose level set.
    Verbose(u32),
}

struct Logger {
    settings: RwLock<LogSettings>,
    file: Mutex<Option<File>>,
}

static LOGGER: LazyLock<Logger> = LazyLock::new(|| Logger {
    settings: RwLock::new(LogSettings::default()),
    file: Mutex::new(None),
});

/// Sets what is logged and where (at start: the file is opened for appending).
pub fn configure(settings: LogSettings) -> Result<(), String> {
    let file = match &settings.file {
        None => None,
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open the log file {}: {e}", path.display()))?,
        ),
    };
    *LOGGER.file.lock() = file;
    *LOGGER.settings.write() = settings;
    Ok(())
}

/// What is logged now.
pub fn settings() -> LogSettings {
    LOGGER.settings.read().clone()
}

/// Whether a line of `severity` would be written.
pub fn enabled(severity: Severity) -> bool {
    let s = LOGGER.settings.read();
    match severity {
        Severity::Info => s.info,
        Severity::Warning => s.warning,
        Severity::Error => s.error,
        Severity::Verbose(level) => level <= s.verbose,
    }
}

/// Writes one line (`file` and `line`: where in tvmrt it was written), if its severity is on.
pub fn write(severity: Severity, file: &str, line: u32, args: fmt::Arguments) {
    if !enabled(severity) {
        return;
    }
    let format = LOGGER.settings.read().format;
    let letter = match severity {
        Severity::Info | Severity::Verbose(_) => 'I',
        Severity::Warning => 'W',
        Severity::Error => 'E',
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (y, mo, d, h, mi, s) = civil(now.as_secs());
    let base = file.rsplit('/').next().unwrap_or(file);
    let pid = std::process::id();
    let text = match format {
        Format::Default => format!(
            "{letter}{mo:02}{d:02} {h:02}:{mi:02}:{s:02}.{:06} {pid} {base}:{line}] {args}\n",
            now.subsec_micros()
        ),
        Format::Iso8601 => {
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z {letter} {pid} {base}:{line}] {args}\n")
        }
    };
    let mut out = LOGGER.file.lock();
    let _ = match out.as_mut() {
        Some(f) => f.write_all(text.as_bytes()),
        None => std::io::stderr().write_all(text.as_bytes()),
    };
}

/// UTC year, month, day, hour, minute, second of `secs` since the Unix epoch.
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 0000-03-01 in 400-year eras (the Gregorian calendar repeats every 146,097 days);
    // a year counted from March puts the leap day last.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    (year, month, day, h as u32, m as u32, s as u32)
}

/// The settings as `/v2/logging` answers them.
pub fn settings_json() -> Value {
    let s = settings();
    let file = s.file.map(|p| p.display().to_string()).unwrap_or_default();
    json!({
        "log_file": file,
        "log_info": s.info,
        "log_warning": s.warning,
        "log_error": s.error,
        "log_verbose_level": s.verbose,
        "log_format": s.format.name(),
    })
}

/// Applies a `/v2/logging` update: the settings it names change, a `null` leaves one as it
/// is; nothing changes if any is refused (the log file, an unknown name, a wrong type).
pub fn update(request: &Map<String, Value>) -> Result<(), String> {
    let mut next = settings();
    for (key, value) in request {
        if value.is_null() {
            continue;
        }
        let flag = |v: &Value| {
            v.as_bool()
                .ok_or_else(|| format!("{key} must be a boolean, not {v}"))
        };
        match key.as_str() {
            "log_file" => {
                return Err(
                    "the log file cannot be changed through the network protocol; \
                            start the server with --log-file"
                        .into(),
                )
            }
            "log_info" => next.info = flag(value)?,
            "log_warning" => next.warning = flag(value)?,
            "log_error" => next.error = flag(value)?,
            "log_verbose_level" => {
                next.verbose = value
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        format!("log_verbose_level must be a non-negative integer, not {value}")
                    })?
            }
            "log_format" => {
                let name = value
                    .as_str()
                    .ok_or_else(|| format!("log_format must be a string, not {value}"))?;
                next.format = Format::parse(name)?;
            }
            other => return Err(format!("unknown log setting '{other}'")),
        }
    }
    *LOGGER.settings.write() = next;
    Ok(())
}

/// Logs an info line.
#[macro_export]
macro_rules! log_info {
    ($($arg:tt)*) => {
        $crate::logging::write($crate::logging::Severity::Info, file!(), line!(), format_args!($($arg)*))
    };
}

/// Logs a warning.
#[macro_export]
macro_rules! log_warning {
    ($($arg:tt)*) => {
        $crate::logging::write($crate::logging::Severity::Warning, file!(), line!(), format_args!($($arg)*))
    };
}

/// Logs an error.
#[macro_export]
macro_rules! log_error {
    ($($arg:tt)*) => {
        $crate::logging::write($crate::logging::Severity::Error, file!(), line!(), format_args!($($arg)*))
    };
}

/// Logs a verbose line of level `$level`.
#[macro_export]
macro_rules! log_verbose {
    ($level:expr, $($arg:tt)*) => {
        $crate::logging::write($crate::logging::Severity::Verbose($level), file!(), line!(), format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        // 2000-02-29T12:34:56Z, a leap day of a year divisible by 400.
        assert_eq!(civil(951_827_696), (2000, 2, 29, 12, 34, 56));
        // 2026-12-03T07:51:02Z.
        assert_eq!(civil(1_796_284_262), (2026, 12, 3, 7, 51, 2));
        // 2100-03-01T00:00:00Z, after a February without a leap day.
        assert_eq!(civil(4_107_542_400), (2100, 3, 1, 0, 0, 0));
    }

    #[test]
    fn updates_are_checked_before_any_applies() {
        let before = settings();
        let bad = |v: Value| update(v.as_object().unwrap()).unwrap_err();
        assert!(bad(json!({"log_file": "/tmp/x"})).contains("--log-file"));
        assert_eq!(
            bad(json!({"log_info": false, "log_error": "no"})),
            "log_error must be a boolean, not \"no\""
        );
        assert!(bad(json!({"log_verbose_level": -1})).contains("non-negative"));
        assert!(bad(json!({"log_format": "xml"})).contains("\"xml\""));
        assert_eq!(
            bad(json!({"log_level": 1})),
            "unknown log setting 'log_level'"
        );
        assert_eq!(settings(), before);
    }
}
