//! `ide doctor`: what this host can enforce, and whether the worker can run
//! as configured here.
//!
//! Security meaning: confinement that silently is not there is worse than
//! none, so the operator can see, before serving, which layers the kernel
//! enforces (Landlock ABI and rights, seccomp, openat2, cgroup kill), and
//! whether the configuration asks for one it cannot give. The facts come
//! from the executor binary ([`facts`]); the broker never probes the host.
#![forbid(unsafe_code)]

pub mod facts;
pub mod verdict;

use crate::config::{self, seed, Config};
use crate::privilege;
use facts::HostFacts;
use serde_json::json;
use std::path::{Path, PathBuf};
use verdict::Verdict;

/// What the doctor examines.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The executor binary to probe with.
    pub executor: PathBuf,
    /// The `--config` seed (the built-in default when missing).
    pub config: PathBuf,
    pub broker_user: String,
    /// False with `--executor-socket` (the broker then keeps its account).
    pub spawns_executor: bool,
}

/// The full report.
#[derive(Debug)]
pub struct Report {
    pub facts: HostFacts,
    /// Where the configuration came from, and what it said.
    pub config_source: String,
    pub config: Result<Config, String>,
    /// The user a root broker drops to (`None`: no drop).
    pub drop_to: Result<Option<String>, String>,
    pub verdict: Verdict,
}

/// Gathers the report.
pub fn examine(inputs: &Inputs) -> Result<Report, String> {
    let facts = facts::probe(&inputs.executor)?;
    let (config_source, config) = load_config(&inputs.config);
    let drop_to = privilege::planned_drop(
        rustix::process::geteuid().is_root(),
        inputs.spawns_executor,
        &inputs.broker_user,
    )
    .map(|u| u.map(|u| format!("{} (uid {})", u.name, u.uid)));
    let verdict = judge(&facts, &config, &drop_to);
    Ok(Report {
        facts,
        config_source,
        config,
        drop_to,
        verdict,
    })
}

fn judge(
    facts: &HostFacts,
    config: &Result<Config, String>,
    drop_to: &Result<Option<String>, String>,
) -> Verdict {
    verdict::judge(
        facts,
        config.as_ref().map_err(String::as_str),
        drop_to.clone(),
    )
}

fn load_config(path: &Path) -> (String, Result<Config, String>) {
    match seed::load_seed_file(path) {
        Ok(Some(value)) => (
            path.display().to_string(),
            config::parse(&value).map_err(|e| e.to_string()),
        ),
        Ok(None) => (
            format!("built-in default ({} is missing)", path.display()),
            config::parse(&seed::builtin_seed()).map_err(|e| e.to_string()),
        ),
        Err(e) => (path.display().to_string(), Err(e.to_string())),
    }
}

impl Report {
    /// The `--json` form.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "ok": self.verdict.ok(),
            "host": self.facts,
            "config": {
                "source": self.config_source,
                "exec_confinement": self.config.as_ref().ok().map(|c| c.fs.exec_confinement),
            },
            "broker_drops_to": self.drop_to.as_ref().ok().cloned().flatten(),
            "problems": self.verdict.problems,
            "warnings": self.verdict.warnings,
        })
    }

    /// The short human table.
    pub fn to_table(&self) -> String {
        let f = &self.facts;
        let yes = |b: bool| if b { "yes" } else { "no" };
        let landlock = if f.landlock.abi > 0 {
            format!(
                "{}, ABI {}{}",
                f.landlock.status,
                f.landlock.abi,
                f.landlock
                    .errata
                    .map(|e| format!(", errata {e:#x}"))
                    .unwrap_or_default()
            )
        } else {
            f.landlock.status.replace('_', " ")
        };
        let mut rows = vec![
            ("kernel", format!("{} ({})", f.kernel, f.arch)),
            (
                "executor",
                format!(
                    "ide-executor {}, runs as uid {}",
                    f.executor_version, f.euid
                ),
            ),
            ("landlock", landlock),
        ];
        if !f.landlock.write_rights.is_empty() {
            rows.push(("  enforces", f.landlock.write_rights.join(", ")));
        }
        if !f.landlock.scopes.is_empty() {
            rows.push(("  scopes", f.landlock.scopes.join(", ")));
        }
        rows.extend([
            (
                "seccomp",
                if f.seccomp.filter_loaded {
                    format!("baseline loads ({} denied calls)", f.seccomp.denied.len())
                } else {
                    format!(
                        "baseline does not load (available: {})",
                        yes(f.seccomp.available)
                    )
                },
            ),
            ("openat2", yes(f.openat2).to_owned()),
            (
                "cgroup v2",
                format!(
                    "{}; per-command cgroup.kill: {}{}",
                    yes(f.cgroup.v2),
                    yes(f.cgroup.kill),
                    f.cgroup
                        .dir
                        .as_ref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default()
                ),
            ),
            ("user namespaces", yes(f.user_namespaces).to_owned()),
            ("/dev/kvm", yes(f.kvm).to_owned()),
            (
                "config",
                match &self.config {
                    Ok(c) => format!(
                        "{}: fs.exec_confinement = {}",
                        self.config_source,
                        serde_json::to_value(c.fs.exec_confinement)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    ),
                    Err(_) => format!("{}: does not parse", self.config_source),
                },
            ),
            (
                "broker",
                match &self.drop_to {
                    Ok(Some(user)) => format!("drops to {user} once its executor runs"),
                    Ok(None) => "keeps the account it is started as".to_owned(),
                    Err(_) => "cannot drop root".to_owned(),
                },
            ),
        ]);
        let mut out = String::from("ide doctor\n");
        for (name, value) in rows {
            out.push_str(&format!("  {name:<16} {value}\n"));
        }
        for w in &self.verdict.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        for p in &self.verdict.problems {
            out.push_str(&format!("problem: {p}\n"));
        }
        out.push_str(if self.verdict.ok() {
            "=> can run as configured\n"
        } else {
            "=> cannot run as configured\n"
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use facts::{parse, tests::FULL};

    fn report(config: Result<Config, String>) -> Report {
        let facts = parse(FULL.as_bytes()).unwrap();
        let drop_to = Ok(Some("nobody (uid 65534)".to_owned()));
        let verdict = judge(&facts, &config, &drop_to);
        Report {
            facts,
            config_source: "./config.yaml".into(),
            config,
            drop_to,
            verdict,
        }
    }

    #[test]
    fn the_table_names_every_fact_and_the_verdict() {
        let table = report(Ok(Config::default())).to_table();
        for needle in [
            "kernel           6.18.44 (x86_64)",
            "landlock         available, ABI 7, errata 0x7",
            "seccomp          baseline loads (1 denied calls)",
            "per-command cgroup.kill: yes (/sys/fs/cgroup/unified)",
            "/dev/kvm         no",
            "./config.yaml: fs.exec_confinement = off",
            "drops to nobody (uid 65534)",
            "warning: fs.exec_confinement is off",
            "=> can run as configured",
        ] {
            assert!(table.contains(needle), "{needle:?} missing in:\n{table}");
        }
        let bad = report(Err("invalid config at `fs`".into())).to_table();
        assert!(
            bad.contains("problem: the configuration does not parse"),
            "{bad}"
        );
        assert!(bad.ends_with("=> cannot run as configured\n"), "{bad}");
    }

    #[test]
    fn the_json_carries_the_facts_and_the_verdict() {
        let v = report(Ok(Config::default())).to_json();
        assert_eq!(v["ok"], true);
        assert_eq!(v["host"]["landlock"]["abi"], 7);
        assert_eq!(v["config"]["exec_confinement"], "off");
        assert_eq!(v["broker_drops_to"], "nobody (uid 65534)");
        assert!(v["problems"].as_array().unwrap().is_empty());
    }

    #[test]
    fn a_missing_seed_falls_back_to_the_built_in_default() {
        let (source, config) = load_config(Path::new("/nonexistent/ide.yaml"));
        assert!(source.starts_with("built-in default"), "{source}");
        assert!(config.is_ok());
    }
}
