//! `server_frames`: each input is one client connection's worth of frames against a brick
//! (protocol/server over features/locks over storage/posix) started once per process. See
//! `xlfs_fuzz::input` for the input format and `xlfs_fuzz::run` for what counts as a finding.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::{Corpus, fuzz_target};
use xlfs_fuzz::brick::Brick;
use xlfs_fuzz::run::{self, Outcome};

static BRICK: OnceLock<Brick> = OnceLock::new();

fn brick() -> &'static Brick {
    BRICK.get_or_init(|| match Brick::start() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xlfs-fuzz: cannot start the brick: {e}");
            std::process::exit(2);
        }
    })
}

/// At exit (libFuzzer ends with `exit`): the brick's temporary directory goes. Not after a
/// finding (an abort): the brick's state may help understand it.
extern "C" fn at_exit() {
    if let Some(b) = BRICK.get() {
        b.remove_temp_dir();
    }
}

fuzz_target!(
    init: {
        run::init();
        let b = brick();
        // SAFETY: registers a function with no preconditions, called once at exit.
        unsafe {
            libc::atexit(at_exit);
        }
        eprintln!("xlfs-fuzz: brick on {} and {} in {}", b.tcp, b.unix.display(), b.dir.display());
    },
    |data: &[u8]| -> Corpus {
        match run::run(brick(), data) {
            Ok(Outcome::Ran) => Corpus::Keep,
            Ok(Outcome::Rejected) => Corpus::Reject,
            Err(finding) => {
                eprintln!("xlfs-fuzz: FINDING: {finding}");
                std::process::abort();
            }
        }
    }
);
