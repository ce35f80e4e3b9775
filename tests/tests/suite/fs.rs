//! `shell::fs*` behaviour tests.
