//! Contract suite. Being written.
