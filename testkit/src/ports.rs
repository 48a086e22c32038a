//! TCP ports for tests that start bricks on fixed ports (`xlfs volume create --port P`: brick
//! i listens on P+i), safe when many test processes run at once.
//!
//! Asking the kernel for a free port (bind to port 0) and then using it and the ports after it
//! races twice: the port comes from the ephemeral range, where any test's outgoing connection
//! (and its TIME_WAIT afterwards) may take P+i before the brick binds it, and another test may
//! be handed the same P. So ports come from below the ephemeral range instead, in blocks of
//! [`BLOCK`], and a test process owns a block by holding an `flock` on that block's file in
//! the temporary directory until it exits. Another program already bound to a port of a
//! block makes the block skipped.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// Ports per block: the most one test may ask for at once.
pub const BLOCK: u16 = 16;

/// Where blocks are taken from: 20000..32000, under Linux's default ephemeral range
/// (32768-60999) and above the usual fixed service ports.
const FIRST: u16 = 20000;
const BLOCKS: u16 = 750;

/// Lock files of the blocks this process holds, kept open until it exits.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// The first of `n` consecutive ports on 127.0.0.1 that no other test process will be given
/// while this one runs, and that nothing listens on now.
///
/// # Panics
/// If `n` is 0 or more than [`BLOCK`], or if no block is free.
pub fn free_ports(n: u16) -> u16 {
    assert!(
        (1..=BLOCK).contains(&n),
        "free_ports({n}): 1 to {BLOCK} ports"
    );
    let dir = std::env::temp_dir().join("xlfs-test-ports");
    std::fs::create_dir_all(&dir).expect("create the port lock directory");
    // Start somewhere different in each process so that parallel tests rarely meet.
    let start = (std::process::id() as u16).wrapping_mul(7919) % BLOCKS;
    for k in 0..BLOCKS {
        let block = (start + k) % BLOCKS;
        let base = FIRST + block * BLOCK;
        let path = dir.join(format!("{base}.lock"));
        let Ok(file) = File::create(&path) else {
            continue;
        };
        // SAFETY: a valid open fd; LOCK_NB never blocks.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        let all_free = (base..base + BLOCK).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if all_free {
            HELD.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(file);
            return base;
        }
    }
    panic!(
        "no block of {BLOCK} free test ports in {FIRST}..{}",
        FIRST + BLOCKS * BLOCK
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_not_given_twice_and_are_bindable() {
        let a = free_ports(4);
        let b = free_ports(BLOCK);
        assert_ne!(a, b);
        assert!(a.abs_diff(b) >= BLOCK);
        for p in [a, a + 3, b, b + BLOCK - 1] {
            TcpListener::bind(("127.0.0.1", p)).expect("free");
        }
        assert!((FIRST..FIRST + BLOCKS * BLOCK).contains(&a));
        assert!(a < 32768 && b + BLOCK <= 32768);
    }

    #[test]
    fn a_block_held_by_another_process_is_skipped() {
        let base = free_ports(1);
        // Another open file description of the same lock file is another flock owner, as
        // another process's would be.
        let path = std::env::temp_dir()
            .join("xlfs-test-ports")
            .join(format!("{base}.lock"));
        let other = File::open(&path).expect("open");
        // SAFETY: a valid open fd.
        let r = unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_ne!(r, 0, "the block is held");
    }
}
