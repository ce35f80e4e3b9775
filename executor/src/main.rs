//! Entry point: harden the process, snapshot the environment, then serve the
//! broker on an inherited socket (`--fd`), a path socket (`--listen`), or
//! both (`--fd` with a rendezvous `--listen`, see [`jobs::linger`]).
//!
//! Security meaning: hardening runs before anything else (no thread, no fd
//! of ours yet), and the environment every child derives from is copied
//! right after, so nothing later can change what commands inherit.
#![forbid(unsafe_code)]

use clap::Parser;
use ide_executor::ceiling::Ceilings;
use ide_executor::cli::{Cli, Mode};
use ide_executor::env::EnvSnapshot;
use ide_executor::jobs::{self, Jobs, STOP_WAIT};
use ide_executor::resolve::Backend;
use ide_executor::server::{serve_connection, ConnectionEnd};
use ide_executor::state::Executor;
use ide_executor::{confine, hygiene, listen, socket};
use std::process::ExitCode;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    ide_executor::sys::bound_heap();
    let hardened = hygiene::harden_process();
    let env = EnvSnapshot::capture();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    if let Err(e) = hardened {
        tracing::error!("cannot harden the process: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    if cli.probe {
        return match confine::probe::print() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("--probe: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let settings = confine::Settings {
        drop_capabilities: cli.drop_capabilities,
        filter_self: true,
    };
    if let Err(e) = confine::init(settings) {
        tracing::error!("{e}");
        return ExitCode::FAILURE;
    }
    let Some(mode) = cli.mode() else {
        tracing::error!("choose --fd, --listen (with --trust-uid), or both");
        return ExitCode::FAILURE;
    };
    let ceilings = match Ceilings::new(&cli.ceiling) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        resolver = ?Backend::current(),
        "ide-executor {} starting",
        env!("CARGO_PKG_VERSION")
    );
    let executor = Arc::new(Executor { env, ceilings });
    // One thread serves every request: a command's round trip never waits
    // for a wake-up on another core, and the main thread, which forks every
    // command (its death signal is tied to the forking thread), lives as long
    // as the process. Blocking file work runs on tokio's blocking pool.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(executor, mode))
}

fn exit_code(end: ConnectionEnd) -> ExitCode {
    match end {
        ConnectionEnd::Closed => {
            tracing::info!("the broker closed the connection; exiting");
            ExitCode::SUCCESS
        }
        ConnectionEnd::Violation(_) => ExitCode::FAILURE,
    }
}

/// Serves `mode` until it ends, or until SIGTERM/SIGINT, which stops every
/// background job (whole process groups) before exiting.
async fn run(executor: Arc<Executor>, mode: Mode) -> ExitCode {
    tokio::select! {
        code = serve(executor, mode) => code,
        () = terminated() => {
            let killed = Jobs::process().stop_all(STOP_WAIT).await;
            tracing::info!(killed, "terminated: every background job was stopped");
            ExitCode::SUCCESS
        }
    }
}

async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

async fn serve(executor: Arc<Executor>, mode: Mode) -> ExitCode {
    match mode {
        Mode::Inherited(fd) => {
            let stream = match socket::adopt(fd) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("--fd {fd}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let end = serve_connection(executor, stream).await;
            Jobs::process().stop_all(STOP_WAIT).await;
            exit_code(end)
        }
        Mode::Rendezvous {
            fd,
            path,
            trust_uid,
        } => {
            let stream = match socket::adopt(fd) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("--fd {fd}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let end = jobs::linger::serve_and_linger(executor, stream, &path, trust_uid).await;
            exit_code(end)
        }
        Mode::Listen { path, trust_uid } => match listen::bind(&path, trust_uid) {
            Ok(listener) => {
                tracing::info!(trust_uid, "listening on {}", path.display());
                listen::serve(executor, listener, trust_uid).await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("--listen: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
