//! `shell::jobs*` behaviour tests.
