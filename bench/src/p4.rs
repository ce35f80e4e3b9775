//! P4: `shell::fs::grep` of a regex over a generated source-like tree
//! (nested dirs, many files, some binary) against `rg` with the same
//! pattern and globs, runs alternating. Both must find the same matches;
//! the figure is the wall-time ratio.
#![forbid(unsafe_code)]

use crate::row::Row;
use crate::stats::quantile;
use crate::world::boot;
use iii_sdk::protocol::TriggerRequest;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// The regex both tools search for; it matches only planted lines, so the
/// match count stays under `max_matches` and both walk the whole tree.
const PATTERN: &str = r"needle_[0-9]+\(";
/// The globs both tools are given (binary `.bin` files are included so
/// both must detect and skip them).
const GLOBS: [&str; 3] = ["*.rs", "*.py", "*.bin"];

/// Wall times and the ratio.
pub struct P4 {
    pub files: usize,
    pub mib: u64,
    pub matches: usize,
    pub ide: Duration,
    pub rg: Duration,
    pub ratio_median: f64,
    pub ratio_p99: f64,
}

const LINES: [&str; 8] = [
    "    let value = compute(alpha, beta).unwrap_or_default();\n",
    "fn handle_request(req: &Request, state: &mut State) -> Result<Response, Error> {\n",
    "    // Walk the entries and keep the ones the caller may see.\n",
    "    for (index, item) in items.iter().enumerate() { total += item.len() * index; }\n",
    "}\n",
    "import os, sys  # helper imports for the generated module\n",
    "    return {\"status\": \"ok\", \"count\": len(results), \"items\": results}\n",
    "\n",
];

/// Generates `files` files totalling about `mib` MiB under `root`: three
/// levels of directories, 1 in 20 files binary, 1 in 50 with planted
/// matches. Returns the number of planted lines inside the globs.
fn make_tree(root: &Path, files: usize, mib: u64) -> usize {
    let per_file = ((mib << 20) / files.max(1) as u64).max(64) as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut planted = 0;
    for i in 0..files {
        let dir = root.join(format!("m{}/s{}/d{}", i % 16, (i / 16) % 8, (i / 128) % 8));
        std::fs::create_dir_all(&dir).expect("create tree dir");
        let target = per_file / 2 + (next() as usize % per_file);
        let (name, body) = if i % 20 == 7 {
            let body: Vec<u8> = (0..target).map(|_| (next() % 7) as u8).collect();
            (format!("blob_{i}.bin"), body)
        } else {
            let mut body = Vec::with_capacity(target + 128);
            while body.len() < target {
                body.extend_from_slice(LINES[next() as usize % LINES.len()].as_bytes());
            }
            let ext = ["rs", "py", "txt"][i % 3];
            if i % 50 == 3 {
                for k in 0..3 {
                    body.extend_from_slice(format!("    let hit = needle_{i}({k});\n").as_bytes());
                }
                if ext != "txt" {
                    planted += 3;
                }
            }
            (format!("file_{i}.{ext}"), body)
        };
        let mut f = std::fs::File::create(dir.join(name)).expect("create tree file");
        f.write_all(&body).expect("write tree file");
    }
    planted
}

fn rg(root: &str) -> (usize, Duration) {
    let t = Instant::now();
    let mut cmd = std::process::Command::new("rg");
    cmd.args(["--no-heading", "-n", "--no-config"]);
    for g in GLOBS {
        cmd.args(["-g", g]);
    }
    // Output goes to a pipe this process reads: rg stops at the first
    // match when its stdout is /dev/null.
    let out = cmd
        .args(["-e", PATTERN, root])
        .output()
        .expect("run rg (install ripgrep)");
    (
        out.stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        t.elapsed(),
    )
}

/// Generates the tree and times `runs` alternating searches of each.
pub async fn run(files: usize, mib: u64, runs: usize) -> P4 {
    let world = boot(json!({"fs": {"allow_unjailed": true}})).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical root");
    let r = root.clone();
    let planted = tokio::task::spawn_blocking(move || make_tree(&r, files, mib))
        .await
        .expect("make tree");
    let root = root.to_string_lossy().into_owned();
    let payload =
        json!({"path": root, "pattern": PATTERN, "include_glob": GLOBS, "max_matches": 100_000});
    let grep = || async {
        let t = Instant::now();
        let request = TriggerRequest::new("shell::fs::grep", payload.clone());
        let reply = world
            .caller
            .trigger(TriggerRequest {
                timeout_ms: Some(600_000),
                ..request
            })
            .await
            .expect("grep failed");
        assert_eq!(reply["truncated"], false, "grep truncated");
        (reply["matches"].as_array().map_or(0, Vec::len), t.elapsed())
    };
    // Warm the page cache for both.
    grep().await;
    rg(&root);
    let (mut ide, mut rgs, mut ratios, mut matches) = (vec![], vec![], vec![], 0);
    for _ in 0..runs.max(1) {
        let (n_ide, d_ide) = grep().await;
        let (n_rg, d_rg) = rg(&root);
        assert_eq!((n_ide, n_rg), (planted, planted), "ide and rg disagree");
        matches = n_ide;
        ide.push(d_ide);
        rgs.push(d_rg);
        ratios.push(d_ide.as_secs_f64() / d_rg.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    ide.sort_unstable();
    rgs.sort_unstable();
    P4 {
        files,
        mib,
        matches,
        ide: ide[ide.len() / 2],
        rg: rgs[rgs.len() / 2],
        ratio_median: quantile(&ratios, 0.5),
        ratio_p99: quantile(&ratios, 0.99),
    }
}

impl P4 {
    /// The table row.
    pub fn row(&self) -> Row {
        Row {
            id: "P4",
            what: "`shell::fs::grep` over a generated source-like tree",
            baseline: format!(
                "`rg` same regex + globs: {:.2} s ({} files, {} MiB, {} matches)",
                self.rg.as_secs_f64(),
                self.files,
                self.mib,
                self.matches
            ),
            measured: format!(
                "{:.2} s = {:.2}× median, {:.2}× p99",
                self.ide.as_secs_f64(),
                self.ratio_median,
                self.ratio_p99
            ),
            goal: "≤ 1.2× `rg`",
            met: self.ratio_median <= 1.2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_has_planted_matches_binaries_and_depth() {
        let dir = tempfile::tempdir().unwrap();
        let planted = make_tree(dir.path(), 200, 1);
        // Files 3, 53, 103, 153 carry three needle lines each; only 53 is a
        // .txt file (outside the globs), so three files count.
        assert_eq!(planted, 9);
        let blob = std::fs::read(dir.path().join("m7/s0/d0/blob_7.bin")).unwrap();
        assert!(blob.iter().take(8192).any(|b| *b == 0));
        let text = std::fs::read_to_string(dir.path().join("m3/s0/d0/file_3.rs")).unwrap();
        assert!(text.contains("needle_3(0)"));
    }
}
