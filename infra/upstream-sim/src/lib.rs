//! upstream-sim
