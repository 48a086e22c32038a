//! xlfs-rebalance: skeleton (the crawl lands in the next commits).
use clap::Parser;

/// Rebalances an xlfs distribute volume (work in progress).
#[derive(Parser)]
#[command(name = "xlfs-rebalance")]
struct Args {}

fn main() {
    let _args = Args::parse();
    eprintln!("xlfs-rebalance: not implemented yet");
    std::process::exit(1);
}
