//! The HTTP/1 server loop: each accepted connection served by hyper with a header-read
//! timeout (a client that does not send a request's whole header within it has its connection
//! closed; an idle kept-alive connection too, as hyper starts the clock when it waits for a
//! header), and a graceful stop that finishes the requests in flight. axum's own `serve` gives
//! hyper no timer, so its header timeout never fires; the body's is `read_body`'s
//! (`Limits::body_timeout`).

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Serves `router` on `listener` until `stop` resolves, then waits for the requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin (as axum).
                    crate::log_error!("tvmrt serve: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let conn = graceful.watch(http1.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A client that goes away or times out is not the server's error.
            let _ = conn.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
