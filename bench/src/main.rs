//! `xlfs-bench hops [CALLS]`: the cost of one fop per translator hop through the plugin ABI,
//! side by side with direct trait calls, in one run.
//!
//! Build and run in release mode after `cargo build --release --workspace` (the pass-through
//! translator is loaded from `target/release/libxlfs_template.so`):
//!
//! ```text
//! cargo build --release --workspace && target/release/xlfs-bench hops 2000000
//! ```

mod hops;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("hops") => {
            let calls = args
                .get(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(1_000_000);
            if let Err(e) = hops::run(calls) {
                eprintln!("xlfs-bench: {e}");
                std::process::exit(1);
            }
        }
        Some("-h" | "--help") | None => {
            println!(
                "usage: xlfs-bench hops [CALLS]\n\n\
                 hops   cost per fop per translator hop: direct generic call, Arc<dyn> call,\n\
                 \x20      and 0..8 pass-through translators loaded from .so (ABI), in one run.\n\
                 \x20      Needs `cargo build --release --workspace` first.\n\n\
                 The file-system workloads (dd, small files, tar) are in bench/workloads.sh."
            );
        }
        Some(other) => {
            eprintln!("xlfs-bench: unknown command {other:?}; try --help");
            std::process::exit(2);
        }
    }
}
