#!/usr/bin/env bash
# Builds release binaries and runs the benchmarks; prints the table and
# writes bench/results.md. Everything runs on loopback and cleans up after
# itself (the engine and workers are children of ide-bench; generated
# trees and files live in temp dirs it removes). Arguments go to ide-bench,
# e.g. `bench/run.sh p4 --tree-files 2000 --tree-mib 100` for a quick run.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rg >/dev/null; then
  apt-get install -y ripgrep >/dev/null 2>&1 || cargo install ripgrep
fi
cargo build --release --workspace --bins
out=$(./target/release/ide-bench "$@")
printf '%s\n' "$out"
{
  echo "# Benchmark results"
  echo
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, kernel $(uname -r)."
  echo
  printf '%s\n' "$out"
} > bench/results.md
