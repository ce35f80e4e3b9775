//! The `ide` broker: the unprivileged half of the worker that faces the iii
//! engine, owns configuration and enforces policy, and asks `ide-executor` to
//! do everything that touches the host.
// Every module forbids `unsafe` itself, except `sys` (allocator tuning).
#![deny(unsafe_code)]

pub mod app;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod exec;
pub mod executor;
pub mod fs;
pub mod functions;
pub mod jobs;
pub mod policy;
pub mod privilege;
pub mod scope;
pub mod sys;
pub mod target;
