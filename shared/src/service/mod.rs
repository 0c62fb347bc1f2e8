//! Services.
