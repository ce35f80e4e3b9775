//! `ide`: the broker binary. Boot order matters: the seed file is checked
//! first (a broken one aborts), the executor and the engine connection come
//! up in the background, and no public function is registered until the
//! authoritative configuration has been fetched and turned into a policy.
#![forbid(unsafe_code)]

use clap::Parser;
use ide::app::App;
use ide::cli::Cli;
use ide::config::{lifecycle, seed, status};
use ide::executor::{Executor, Source};
use ide::{engine, functions};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn executor_source(cli: &Cli) -> Result<Source, String> {
    if let Some(path) = &cli.executor_socket {
        return Ok(Source::Socket { path: path.clone() });
    }
    let program = match &cli.executor {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate our own binary: {e}"))?
            .with_file_name("ide-executor"),
    };
    Ok(Source::Spawn { program })
}

async fn run(cli: Cli) -> Result<(), String> {
    let seed_file = seed::load_seed_file(&cli.config)
        .map_err(|e| format!("refusing to start: --config {}: {e}", cli.config.display()))?;
    engine::spawn_unreachable_probe(&cli.url);

    let (events, job_events) = tokio::sync::mpsc::unbounded_channel();
    let executor = Executor::start(executor_source(&cli)?, events);
    let iii = engine::connect(&cli.url, None);
    loop {
        match iii.wait_until_registered(Duration::from_secs(3600)).await {
            Ok(()) => break,
            Err(iii_sdk::Error::Timeout) => continue,
            Err(e) => return Err(format!("the engine refused this worker: {e}")),
        }
    }

    let id = lifecycle::config_id();
    let value = lifecycle::reconcile(&iii, &id, seed_file)
        .await
        .map_err(|e| format!("refusing to start: {e}"))?;
    let policy = lifecycle::build_policy(&executor, &value)
        .await
        .map_err(|e| format!("refusing to start: configuration '{id}': {e}"))?;
    let app = Arc::new(App {
        policy: arc_swap::ArcSwap::from_pointee(policy),
        executor,
        iii: iii.clone(),
        status: status::ReloadStatus::default(),
    });
    let rt = tokio::runtime::Handle::current();
    lifecycle::subscribe(&iii, &rt, &app, &id)
        .await
        .map_err(|e| format!("refusing to start: {e}"))?;
    functions::register_all(&iii, &rt, &app, job_events);
    tracing::info!("ide is serving");

    shutdown_signal().await;
    tracing::info!("shutting down");
    iii.shutdown_async().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
