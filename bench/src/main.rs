//! `xlfs-bench`: the benchmark helpers.
//!
//! - `xlfs-bench hops [CALLS]`: the cost of one fop per translator hop through the plugin ABI,
//!   side by side with direct trait calls, in one run.
//! - `xlfs-bench report --raw FILE [--out-md FILE] [--out-json FILE]`: the tables of the
//!   standard workloads from the raw results written by `bench/run.sh`.
//!
//! Build and run in release mode after `cargo build --release --workspace` (the pass-through
//! translator is loaded from `target/release/libxlfs_template.so`):
//!
//! ```text
//! cargo build --release --workspace && target/release/xlfs-bench hops 2000000
//! bash bench/run.sh --quick        # builds, runs W1..W6, calls `xlfs-bench report`
//! ```

mod hops;
mod report;
mod w6fops;

const USAGE: &str = "usage: xlfs-bench hops [CALLS]\n       \
     xlfs-bench report --raw FILE [--out-md FILE] [--out-json FILE]\n\n\
     hops     cost per fop per translator hop: direct generic call, Arc<dyn> call,\n\
     \x20        and 0..8 pass-through translators loaded from .so (ABI), in one run.\n\
     \x20        Needs `cargo build --release --workspace` first.\n\
     report   read the raw results of bench/run.sh (RESULT lines tagged with round and\n\
     \x20        target, META/TARGET/SKIP/ERROR lines) and write one markdown table per\n\
     \x20        workload (median, min-max, ratios to the floors) and a JSON document with\n\
     \x20        every raw value. Without --out-md the markdown goes to stdout.\n\n\
     The file-system workloads (W1..W6) are run by bench/run.sh (see bench/README.md).";

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
        Some("report") => {
            if let Err(e) = report::run(&args[1..]) {
                eprintln!("xlfs-bench: {e}");
                std::process::exit(2);
            }
        }
        Some("-h" | "--help") | None => println!("{USAGE}"),
        Some(other) => {
            eprintln!("xlfs-bench: unknown command {other:?}; try --help");
            std::process::exit(2);
        }
    }
}
