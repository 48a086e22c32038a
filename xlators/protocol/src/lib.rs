#![doc = include_str!("../README.md")]

pub mod client;
pub mod creds;
pub mod fetch;
pub mod server;
pub mod wire;

pub use client::Client;
pub use creds::Credentials;
pub use fetch::{FetchError, VolfileServer, fetch_volfile};
pub use server::Server;

xlator_api::export_translators!(Client, Server);
