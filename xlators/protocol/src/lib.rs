#![doc = include_str!("../README.md")]

pub mod client;
pub mod fetch;
pub mod server;
pub mod wire;

pub use client::Client;
pub use fetch::{FetchError, VolfileServer, fetch_volfile};
pub use server::Server;

xlator_api::export_translators!(Client, Server);

/// A statedump from a JSON object (protocol's dumps are built with `serde_json::json!`).
pub(crate) fn json_dump(v: serde_json::Value) -> xlator_api::Dump {
    xlator_api::Dump::from_json(v)
}
