//! Handlers.
