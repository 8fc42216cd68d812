//! Diagnostics through the `log` crate, switched on by the `TVMRT_LOG` environment variable.
//!
//! tvmrt logs its loader decisions (which file, which symbol, which blob layout, which loader)
//! with `log::debug!` under targets starting with `tvmrt`. A Rust program that installs its own
//! logger sees them there. Otherwise, when `TVMRT_LOG` is set (`error`, `warn`, `info`, `debug`,
//! `trace`, or `off`), [`init_from_env`] installs a small logger writing
//! `[tvmrt LEVEL target] message` lines to standard error; the `tvmrt` tool calls it at start-up,
//! and the library calls it before loading a module, so C programs get the same switch.

use std::io::Write;
use std::sync::Once;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// The environment variable that sets the level.
pub const ENV_VAR: &str = "TVMRT_LOG";

struct StderrLogger {
    level: LevelFilter,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        };
        // One write per line, so lines from several threads do not interleave.
        let line = format!("[tvmrt {level} {}] {}\n", record.target(), record.args());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Parses a `TVMRT_LOG` value (case-insensitive); `None` for an unknown one.
pub fn parse_level(value: &str) -> Option<LevelFilter> {
    let v = value.trim();
    if v.is_empty() {
        return Some(LevelFilter::Off);
    }
    v.parse::<LevelFilter>().ok()
}

static INIT: Once = Once::new();

/// Installs the standard-error logger at the level `TVMRT_LOG` names, once per process. Does
/// nothing when the variable is unset or when the program already installed a logger (its
/// logger then receives tvmrt's records). An unknown level is reported once on standard error
/// and logging stays off.
pub fn init_from_env() {
    INIT.call_once(|| {
        let Ok(value) = std::env::var(ENV_VAR) else {
            return;
        };
        let Some(level) = parse_level(&value) else {
            eprintln!(
                "tvmrt: ignoring {ENV_VAR}={value:?}: expected one of off, error, warn, info, \
                 debug, trace"
            );
            return;
        };
        if level == LevelFilter::Off {
            return;
        }
        // Leaked once: the logger lives as long as the process, as `log` requires.
        let logger: &'static StderrLogger = Box::leak(Box::new(StderrLogger { level }));
        if log::set_logger(logger).is_ok() {
            log::set_max_level(level);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(parse_level("debug"), Some(LevelFilter::Debug));
        assert_eq!(parse_level("DEBUG"), Some(LevelFilter::Debug));
        assert_eq!(parse_level(" info "), Some(LevelFilter::Info));
        assert_eq!(parse_level(""), Some(LevelFilter::Off));
        assert_eq!(parse_level("off"), Some(LevelFilter::Off));
        assert_eq!(parse_level("loud"), None);
    }

    #[test]
    fn logger_filters_by_level() {
        let l = StderrLogger {
            level: LevelFilter::Info,
        };
        let meta = |level| Metadata::builder().level(level).target("tvmrt").build();
        assert!(l.enabled(&meta(Level::Warn)));
        assert!(l.enabled(&meta(Level::Info)));
        assert!(!l.enabled(&meta(Level::Debug)));
    }
}
