//! Embedded backend (SQLite). Being written.
