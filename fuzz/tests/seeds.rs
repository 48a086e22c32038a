//! Every seed runs against a brick without a finding. A plain test (no libFuzzer): `cargo
//! test` from `fuzz/`.

use xlfs_fuzz::brick::Brick;
use xlfs_fuzz::run::{self, Outcome};

#[test]
fn every_seed_runs_clean() {
    run::init();
    // Dropped at the end, on failure too: its temporary directory goes with it.
    let b = Brick::start().expect("brick");
    for (name, bytes) in xlfs_fuzz::seeds::all() {
        // Twice: the second run finds what the first made (EEXIST paths).
        for round in 0..2 {
            assert_eq!(
                run::run(&b, &bytes),
                Ok(Outcome::Ran),
                "seed {name}, round {round}"
            );
        }
    }
}
