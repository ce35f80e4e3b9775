//! End-to-end behaviour tests: the real `ide` and `ide-executor` binaries
//! against the in-repo test engine, driven through a real `iii-sdk` client.
//! One module per function family, built as one test binary.

mod config;
mod confinement;
mod exec;
mod fs;
mod jobs;
mod scope;
mod support;
