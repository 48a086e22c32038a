//! xlfs-mgmtd: the management daemon of each host.
//!
//! The cluster's configuration (its peers, and each volume's description, secret and whether
//! it is started) is a log of [`cluster::Change`]s replicated among the peers by Raft (TiKV's
//! `raft` crate, driven by [`replog`]); a change is made only when a majority of the peers
//! accept it. Each daemon applies the log to
//! its host's state directory (the one the `xlfs` command uses), and starts, stops and
//! restarts the bricks of its own host to match.
//!
//! Peers and the `xlfs` command talk to a daemon over TCP ([`rpc`]), each connection proving
//! it holds the cluster secret (HMAC-SHA256 challenge-response both ways).

pub mod cluster;
pub mod daemon;
pub mod proto;
pub mod replog;
pub mod rpc;
pub mod store;
