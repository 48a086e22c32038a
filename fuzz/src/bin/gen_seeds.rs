//! Writes the seed corpus of `server_frames` (see `xlfs_fuzz::seeds`).
//!
//! Regenerate after a wire change (a new fop, a new message) with, from `fuzz/`:
//!
//! ```text
//! cargo run --bin gen_seeds -- corpus/server_frames
//! ```
//!
//! A plain build (no sancov flags): this program does not link libFuzzer. Files are named
//! after their seed, so regenerating replaces them; seeds no longer made are left in place
//! (delete the directory first for a clean corpus).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "corpus/server_frames".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let seeds = xlfs_fuzz::seeds::all();
    for (name, bytes) in &seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    println!("wrote {} seeds to {}", seeds.len(), dir.display());
    Ok(())
}
