//! A TCP listener whose connections a handler can abort, for "commit, then drop the response".
//!
//! The nasty upstream failure is a write that succeeded but whose answer never arrived. To make a
//! real HTTP client see exactly that (a transport error, not a status code and not a long hang),
//! the handler must be able to kill the very connection its request came in on. axum's `serve`
//! takes any [`Listener`], and its connect-info hook lets each connection hand a value to its
//! requests, so each accepted stream carries a shared kill flag and every request on it gets a
//! [`ConnectionKill`] handle. Once killed, the stream fails all I/O and resets the socket, so the
//! response the handler returns is never written and hyper drops the connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Wraps a bound [`TcpListener`] so that every accepted stream is killable.
pub(crate) struct KillableListener {
    inner: TcpListener,
}

impl KillableListener {
    pub(crate) fn new(inner: TcpListener) -> Self {
        Self { inner }
    }
}

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Benchmarks measure latency; Nagle would add tens of milliseconds of noise.
                    let _ = stream.set_nodelay(true);
                    let stream = KillableStream {
                        inner: stream,
                        killed: Arc::new(AtomicBool::new(false)),
                    };
                    return (stream, addr);
                }
                Err(err) if is_per_connection(&err) => {}
                Err(err) => {
                    // E.g. out of file descriptors under a benchmark: back off instead of spinning.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A TCP stream that fails all I/O once its kill flag is set.
pub(crate) struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
}

impl KillableStream {
    /// Checks the flag and, on the first look after a kill, arms a reset: with a zero linger the
    /// close that follows sends RST, so the client fails at once instead of seeing a clean EOF that
    /// some clients might treat as a retryable idle-connection close.
    fn check(&self) -> io::Result<()> {
        if self.killed.load(Ordering::Acquire) {
            let _ = self.inner.set_zero_linger();
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection killed by upstream-sim",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper writes head and body with one vectored write; it must be checked like the rest.
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// Handed to every request on a [`KillableListener`] connection (as axum connect info).
#[derive(Clone, Debug)]
pub(crate) struct ConnectionKill(Arc<AtomicBool>);

impl ConnectionKill {
    /// Nothing more reaches the peer once this returns; the response the handler goes on to return
    /// fails to write and hyper closes the connection.
    pub(crate) fn kill(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnectionKill {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        Self(Arc::clone(&stream.io().killed))
    }
}
