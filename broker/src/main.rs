//! `ide`: the broker binary. Boot order matters: the engine token leaves the
//! environment before anything else ([`privilege::token`]); the seed file is
//! checked first (a broken one aborts); the host is probed through the
//! executor binary; the executor comes up, and a broker started as root
//! drops to its unprivileged user only then, before the engine connection is
//! made; no public function is registered until the authoritative
//! configuration has been fetched and turned into a policy.
#![forbid(unsafe_code)]

use clap::Parser;
use ide::app::App;
use ide::cli::{Cli, Command};
use ide::config::{lifecycle, seed, status};
use ide::executor::{rendezvous, Executor, Rendezvous, Source};
use ide::privilege::{self, BrokerUser};
use ide::{doctor, engine, functions};
use ide_proto::{FsRequest, Request};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    ide::sys::bound_heap();
    if let Err(e) = privilege::token::move_out_of_environment() {
        eprintln!("ide: cannot move III_TOKEN out of the environment: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    init_logging();
    let token = match cli.engine_token_on_stdin {
        true => match privilege::token::take_from_stdin() {
            Ok(token) => token,
            Err(e) => {
                tracing::error!("cannot read the engine token handed over on stdin: {e}");
                return ExitCode::FAILURE;
            }
        },
        false => None,
    };
    if let Some(Command::Doctor { json }) = cli.command {
        return run_doctor(&cli, json);
    }
    // One thread runs every handler: the SDK already delivers invocations
    // from its own connection thread, and a second worker only added
    // cross-core wake-ups to each call (P1 in README "Performance").
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli, token)) {
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

fn executor_program(cli: &Cli) -> Result<PathBuf, String> {
    match &cli.executor {
        Some(p) => Ok(p.clone()),
        None => Ok(std::env::current_exe()
            .map_err(|e| format!("cannot locate our own binary: {e}"))?
            .with_file_name("ide-executor")),
    }
}

/// Where the executor comes from. A spawned one trusts, on its rendezvous
/// socket, the uid this broker serves as (`broker_uid`: after any drop).
fn executor_source(cli: &Cli, broker_uid: u32) -> Result<Source, String> {
    if let Some(path) = &cli.executor_socket {
        return Ok(Source::Socket { path: path.clone() });
    }
    let program = executor_program(cli)?;
    let state_dir = cli
        .state_dir
        .clone()
        .unwrap_or_else(rendezvous::default_state_dir);
    Ok(Source::Spawn {
        program,
        rendezvous: Some(Rendezvous {
            path: rendezvous::socket_path(&state_dir, &cli.url, &lifecycle::config_id()),
            trust_uid: broker_uid,
        }),
    })
}

fn run_doctor(cli: &Cli, json: bool) -> ExitCode {
    let inputs = doctor::Inputs {
        executor: match executor_program(cli) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::FAILURE;
            }
        },
        config: cli.config.clone(),
        broker_user: cli.broker_user.clone(),
        spawns_executor: cli.executor_socket.is_none(),
    };
    match doctor::examine(&inputs) {
        Ok(report) if json => {
            println!("{}", report.to_json());
            if report.verdict.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Ok(report) => {
            print!("{}", report.to_table());
            if report.verdict.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            tracing::error!("ide doctor: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The host facts for `shell::config-status`, probed through the executor
/// binary while the broker may still execute programs.
async fn probe_host(cli: &Cli) -> serde_json::Value {
    let probed = match executor_program(cli) {
        Ok(program) => tokio::task::spawn_blocking(move || doctor::facts::probe(&program))
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        Err(e) => Err(e),
    };
    match probed.and_then(|f| serde_json::to_value(f).map_err(|e| e.to_string())) {
        Ok(facts) => facts,
        Err(e) => {
            tracing::warn!("cannot probe the host's confinement: {e}");
            serde_json::json!({ "probe_error": e })
        }
    }
}

/// Waits for the executor to answer, then drops the broker to `user`.
async fn drop_once_executor_runs(executor: &Executor, user: &BrokerUser) -> Result<(), String> {
    let refuse = |e: String| format!("refusing to start: cannot drop root to {}: {e}", user.name);
    match executor
        .call(Request::Fs(FsRequest::CanonicalRoots { roots: vec![] }))
        .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(refuse(format!("the executor failed: {e}"))),
        Err(e) => return Err(refuse(format!("the executor did not come up: {e}"))),
    }
    privilege::drop_to(user).map_err(refuse)?;
    tracing::info!(
        uid = user.uid,
        "dropped root: the broker now runs as {} with no capabilities and cannot execute programs",
        user.name
    );
    Ok(())
}

async fn run(cli: Cli, token: Option<String>) -> Result<(), String> {
    let seed_file = seed::load_seed_file(&cli.config)
        .map_err(|e| format!("refusing to start: --config {}: {e}", cli.config.display()))?;
    let drop_plan = privilege::planned_drop(
        rustix::process::geteuid().is_root(),
        cli.executor_socket.is_none(),
        &cli.broker_user,
    )
    .map_err(|e| format!("refusing to start: {e}"))?;
    let host_facts = probe_host(&cli).await;
    engine::spawn_unreachable_probe(&cli.url);

    let (events, job_events) = tokio::sync::mpsc::unbounded_channel();
    let broker_uid = drop_plan
        .as_ref()
        .map_or_else(|| rustix::process::geteuid().as_raw(), |user| user.uid);
    let executor = Executor::start(executor_source(&cli, broker_uid)?, events);
    if let Some(user) = &drop_plan {
        drop_once_executor_runs(&executor, user).await?;
    }
    let iii = engine::connect(&cli.url, token.as_deref());
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
    app.status.set_confinement(host_facts);
    let rt = tokio::runtime::Handle::current();
    lifecycle::subscribe(&iii, &rt, &app, &id)
        .await
        .map_err(|e| format!("refusing to start: {e}"))?;
    functions::register_all(&iii, &rt, &app, job_events);
    tracing::info!("ide is serving");

    shutdown_signal().await;
    tracing::info!("shutting down");
    iii.shutdown_async().await;
    app.executor.shutdown().await;
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
