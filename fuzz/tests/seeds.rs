//! Every seed runs against a brick without a finding. A plain test (no libFuzzer): `cargo
//! test` from `fuzz/`.

use std::sync::OnceLock;

use xlfs_fuzz::brick::Brick;
use xlfs_fuzz::run::{self, Outcome};

fn brick() -> &'static Brick {
    static B: OnceLock<Brick> = OnceLock::new();
    B.get_or_init(|| {
        run::init();
        Brick::start().expect("brick")
    })
}

#[test]
fn every_seed_runs_clean() {
    let b = brick();
    for (name, bytes) in xlfs_fuzz::seeds::all() {
        // Twice: the second run finds what the first made (EEXIST paths).
        for round in 0..2 {
            assert_eq!(
                run::run(b, &bytes),
                Ok(Outcome::Ran),
                "seed {name}, round {round}"
            );
        }
    }
}
