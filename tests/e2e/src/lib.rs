//! Helpers for the browser tests live in tests/; this library is empty.
