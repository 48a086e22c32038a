//! Coverage-guided fuzzing of the brick's wire: libFuzzer drives protocol/server (over
//! features/locks and a real storage/posix) through real sockets, one connection per input.
//! See README.md for the target, the input format and how to run it.
//!
//! ```
//! use xlfs_fuzz::input::{Plan, Step};
//! // An input: no handshake by the harness, one frame of three bytes, then wait for a reply.
//! let plan = Plan { steps: vec![Step::Frame(vec![1, 2, 3]), Step::Await], ..Plan::default() };
//! assert_eq!(Plan::parse(&plan.to_bytes()), plan);
//! ```

pub mod brick;
pub mod client;
pub mod input;
pub mod run;
pub mod seeds;
pub mod tame;
