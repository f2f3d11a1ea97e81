//! Rust SDK of Muster, the lease broker for worker fleets.
#![deny(missing_docs)]

pub mod error;
pub mod sse;
pub mod wire;

pub use error::{Error, Problem, Result, Retry, CODES};
