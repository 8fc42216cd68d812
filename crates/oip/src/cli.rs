//! `tvmrt serve --model-repository DIR` and `tvmrt serve model.so`: the OIP server's own
//! arguments (the tool adds `--host` and `--port`, shared with the LLM server) and its run: the
//! models loaded, HTTP and gRPC served until SIGTERM or SIGINT, then the requests in flight
//! finished and the models unloaded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tvmrt::{Error, Result};

use crate::grpc;
use crate::http::{self, App, Limits};
use crate::listen;
use crate::log_info;
use crate::logging::{self, LogSettings};
use crate::model::Defaults;
use crate::repository::{Repository, Source};
use crate::trace::{Given, Tracer};

/// The OIP server's arguments.
#[derive(clap::Args, Debug, Clone)]
#[group(id = "oip")]
#[command(next_help_heading = "Tensor models over KServe's Open Inference Protocol")]
pub struct Args {
    /// Serve the TVM models of a repository in Triton's layout (MODEL/config.pbtxt, optional;
    /// MODEL/1/model.so) over KServe's Open Inference Protocol (HTTP and gRPC).
    #[arg(long, value_name = "DIR")]
    pub model_repository: Option<PathBuf>,

    /// The gRPC port of the OIP server (0: any free port; printed at start).
    #[arg(long, value_name = "PORT", default_value_t = 8001)]
    pub grpc_port: u16,

    /// The largest inference request in bytes; larger ones get 413.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub max_request_size: usize,

    /// Seconds a model may take to answer a request (504 beyond).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub request_timeout: u64,

    /// Seconds an HTTP request's header may take to arrive, and a kept-alive connection may
    /// wait idle for the next one; the connection is closed beyond.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub header_read_timeout: u64,

    /// Seconds an HTTP request's body may take to arrive (408 beyond).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub body_read_timeout: u64,

    /// Requests waiting per model when its configuration sets no
    /// `default_queue_policy { max_queue_size }`; more get 503.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_queue_size: usize,

    /// Tracing, as `tritonserver --trace-config` takes it (repeatable): `triton,file=PATH`,
    /// `level=TIMESTAMPS` (or `TENSORS`, `OFF`), `rate=N` (one request in N), `count=N`
    /// (-1: no end), `triton,log-frequency=N` (N traces per indexed file).
    #[arg(long, value_name = "[triton,]SETTING=VALUE")]
    pub trace_config: Vec<String>,

    /// Append the log to this file instead of stderr.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,

    /// Log verbose lines up to this level (1: each inference request).
    #[arg(long, value_name = "LEVEL", default_value_t = 0)]
    pub log_verbose: u32,

    /// Log info lines (models loaded and unloaded, shutdown).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_info: bool,

    /// Log warnings.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_warning: bool,

    /// Log errors.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_error: bool,

    /// The log's line format: `default` or `ISO8601`.
    #[arg(long, value_name = "FORMAT", default_value = "default")]
    pub log_format: String,
}

/// The tracer `--trace-config` asks for.
fn tracer(config: &[String]) -> Result<Tracer> {
    let mut file = None;
    let mut given = Given::default();
    for entry in config {
        let bad = |why: String| Error::value(format!("--trace-config {entry}: {why}"));
        let setting = match entry.split_once(',') {
            Some(("triton", rest)) => rest,
            Some((mode, _)) if !mode.contains('=') => {
                return Err(bad(format!(
                    "trace mode '{mode}' is not supported (only triton)"
                )))
            }
            _ => entry.as_str(),
        };
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| bad("expected SETTING=VALUE".into()))?;
        match key {
            "file" => file = Some(PathBuf::from(value)),
            "mode" if value == "triton" => {}
            "mode" => return Err(bad(format!("trace mode '{value}' is not supported"))),
            _ => given.set(key, value).map_err(bad)?,
        }
    }
    Tracer::new(file, given).map_err(|e| Error::value(format!("--trace-config: {e}")))
}

/// Sets up the log as the arguments ask.
fn start_log(a: &Args) -> Result<()> {
    logging::configure(LogSettings {
        file: a.log_file.clone(),
        info: a.log_info,
        warning: a.log_warning,
        error: a.log_error,
        verbose: a.log_verbose,
        format: logging::Format::parse(&a.log_format)
            .map_err(|e| Error::value(format!("--log-format: {e}")))?,
    })
    .map_err(Error::value)
}

/// Serves `source` (a repository directory or one model file) on `host`:`port` (HTTP) and
/// `--grpc-port`, with `other` routes (the LLM server's) beside the protocol's on HTTP.
pub fn serve(
    a: &Args,
    source: Source,
    host: &str,
    port: u16,
    other: Option<axum::Router>,
) -> Result<()> {
    let limits = Limits {
        max_body: a.max_request_size,
        timeout: Duration::from_secs(a.request_timeout.max(1)),
        header_timeout: Duration::from_secs(a.header_read_timeout.max(1)),
        body_timeout: Duration::from_secs(a.body_read_timeout.max(1)),
    };
    let defaults = Defaults {
        max_queue: a.max_queue_size.max(1),
    };
    start_log(a)?;
    let tracer = tracer(&a.trace_config)?;
    let repo = Arc::new(Repository::new(source, defaults));
    let idle = crate::idle::Idle::new();
    let app = Arc::new(App {
        tracer,
        idle: idle.clone(),
        repo: repo.clone(),
        limits,
        shm: Default::default(),
        ready: false.into(),
        stopping: false.into(),
        other,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(protocol_threads())
        .enable_all()
        .build()
        .map_err(|e| Error::runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(async move {
        tokio::spawn(idle.watch(crate::idle::QUIET, crate::idle::release_free_memory));
        // Installed before anything loads: a signal during loading also stops the server.
        let signalled = shutdown_signal()?;
        let bind = |port: u16| async move {
            tokio::net::TcpListener::bind((host, port))
                .await
                .map_err(|e| Error::value(format!("cannot listen on {host}:{port}: {e}")))
        };
        let listener = bind(port).await?;
        let addr: SocketAddr = listener
            .local_addr()
            .map_err(|e| Error::runtime(e.to_string()))?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let server = listen::serve(
            listener,
            http::router(app.clone()),
            app.limits.header_timeout,
            stopped(),
        );
        let http_task = tokio::spawn(server);
        let grpc_listener = bind(a.grpc_port).await?;
        let grpc_addr = grpc_listener
            .local_addr()
            .map_err(|e| Error::runtime(e.to_string()))?;
        // gRPC's limits: a unary call (its message arriving, then the model's answer) must end
        // within both timeouts (tonic cancels it: CANCELLED, "Timeout expired"); HTTP/2 pings
        // find connections whose peer went away. A stream's responses are not bounded.
        let grpc_server = tonic::transport::Server::builder()
            .timeout(app.limits.body_timeout + app.limits.timeout)
            .http2_keepalive_interval(Some(Duration::from_secs(60)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
            .add_service(grpc::service(app.clone()))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
                stopped(),
            );
        let grpc_task = tokio::spawn(grpc_server);
        // Scripts read the addresses from these lines.
        println!("listening on http://{addr}");
        println!("listening on grpc://{grpc_addr}");
        repo.load_all().await;
        app.ready.store(true, Ordering::Relaxed);
        log_info!(
            "tvmrt serve: {} of {} models ready",
            repo.ready().len(),
            repo.names().len()
        );
        signalled.await;
        log_info!("tvmrt serve: shutting down: finishing the requests in flight");
        app.stopping.store(true, Ordering::Relaxed);
        let _ = stop_tx.send(true);
        let http = http_task.await;
        let grpc = grpc_task.await;
        repo.unload_all().await;
        app.tracer.flush();
        log_info!("tvmrt serve: stopped");
        match (http, grpc) {
            (Ok(()), Ok(Ok(()))) => Ok(()),
            (_, Ok(Err(e))) => Err(Error::runtime(format!("the gRPC server failed: {e}"))),
            (Err(e), _) | (_, Err(e)) => Err(Error::runtime(format!("a server panicked: {e}"))),
        }
    })
}

/// The async runtime's worker threads: `TOKIO_WORKER_THREADS` when set, else half the CPUs
/// (at least one). The models' instance threads (and their kernel thread pools) do the
/// computing; what a request costs the protocol side is tens of microseconds, and on a small
/// machine every further worker is woken to look for work at each request (one server on 2
/// cores: 75 against 115 us of CPU per request, p50 0.17 against 0.21 ms; BENCHMARKS.md).
fn protocol_threads() -> usize {
    let from_env = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    from_env.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cpus / 2).max(1)
    })
}

/// Resolves at the first SIGTERM or SIGINT (both handlers installed at once).
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind: SignalKind| {
        signal(kind).map_err(|e| Error::runtime(format!("cannot handle a signal: {e}")))
    };
    let (mut term, mut int) = (
        install(SignalKind::terminate())?,
        install(SignalKind::interrupt())?,
    );
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
