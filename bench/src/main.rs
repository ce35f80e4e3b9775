//! `ide-bench`: what `ide` costs, each figure next to a baseline measured in
//! the same run (machines here are shared and noisy, so absolute times mean
//! little). Run through `bench/run.sh`, which builds release binaries.
#![forbid(unsafe_code)]

mod minimal;
mod p1;
mod p2;
mod p3;
mod p4;
mod p5;
mod p6;
mod p7;
mod p8;
mod row;
mod rss;
mod stats;
mod transfer;
mod world;

use clap::Parser;

/// Which benchmarks to run.
#[derive(Parser)]
#[command(name = "ide-bench")]
struct Args {
    /// Benchmarks to run (p1 … p8); all when empty.
    ids: Vec<String>,
    /// Samples per latency series (P1, P3).
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Rounds of 200 concurrent calls (P2).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Files in the generated P4 tree.
    #[arg(long, default_value_t = 20_000)]
    tree_files: usize,
    /// Total size of the P4 tree in MiB.
    #[arg(long, default_value_t = 1024)]
    tree_mib: u64,
    /// Size of the P5/P6 transfer in MiB.
    #[arg(long, default_value_t = 1024)]
    stream_mib: u64,
    /// Alternating runs of each side for P4, P5 and P6.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let wants = |id: &str| args.ids.is_empty() || args.ids.iter().any(|a| a == id);
    let mut rows = Vec::new();
    let mut details = String::new();
    if wants("p1") {
        let p1 = p1::run(args.samples).await;
        details += &p1.table();
        rows.push(p1.row());
    }
    if wants("p2") {
        rows.push(p2::run(args.rounds).await.row());
    }
    if wants("p3") {
        rows.push(p3::run(args.samples).await.row());
    }
    if wants("p4") {
        rows.push(
            p4::run(args.tree_files, args.tree_mib, args.runs)
                .await
                .row(),
        );
    }
    if wants("p5") {
        rows.push(p5::row(&p5::run(args.stream_mib, args.runs).await));
    }
    if wants("p6") {
        rows.push(p6::row(&p6::run(args.stream_mib, args.runs).await));
    }
    if wants("p7") {
        rows.push(p7::run().await.row());
    }
    if wants("p8") {
        rows.push(p8::run().await.row());
    }
    print!("{}\n{details}", row::table(&rows));
}
