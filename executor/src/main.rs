//! Entry point: harden the process, snapshot the environment, then serve the
//! broker on an inherited socket (`--fd`) or a path socket (`--listen`).
//!
//! Security meaning: hardening runs before anything else (no thread, no fd
//! of ours yet), and the environment every child derives from is copied
//! right after, so nothing later can change what commands inherit.
#![forbid(unsafe_code)]

use clap::Parser;
use ide_executor::ceiling::Ceilings;
use ide_executor::cli::{Cli, Mode};
use ide_executor::env::EnvSnapshot;
use ide_executor::resolve::Backend;
use ide_executor::server::{serve_connection, ConnectionEnd};
use ide_executor::state::Executor;
use ide_executor::{hygiene, listen, socket};
use std::process::ExitCode;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
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
    let Some(mode) = cli.mode() else {
        tracing::error!("choose exactly one of --fd or --listen (with --trust-uid)");
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
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

async fn run(executor: Arc<Executor>, mode: Mode) -> ExitCode {
    match mode {
        Mode::Inherited(fd) => {
            let stream = match socket::adopt(fd) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("--fd {fd}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match serve_connection(executor, stream).await {
                ConnectionEnd::Closed => {
                    tracing::info!("the broker closed the connection; exiting");
                    ExitCode::SUCCESS
                }
                ConnectionEnd::Violation(_) => ExitCode::FAILURE,
            }
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
