//! Heap settings for the host processes.
//!
//! A host's fops allocate many small, short-lived objects (frames, futures, replies) between
//! buffers of one to a few KiB (a tar's 10 KiB writes, directory listings). glibc keeps freed
//! small chunks in "fast bins" and, before serving any request of 1 KiB or more, merges every
//! one of them back into the heap (`malloc_consolidate`): in a replica 2 mount extracting a
//! source tree, that and the searches it feeds were about a tenth of the mount's CPU time.
//! [`tune`] turns the fast bins off (`M_MXFAST` 0); the per-thread cache in front of them
//! still serves small chunks without a lock. Measured side by side on this project's
//! machine (2 vCPUs, replica 2, `tar x` + `rm -rf` of drivers/net): 11.0–11.6 s against
//! 12.6–13.0 s with the heap thresholds this module used to set (mmap 4 MiB, trim 64 MiB,
//! which kept payload buffers in the heap), and W1, W2 and W4 as fast or faster
//! (bench/README.md).
//!
//! Set `GLIBC_TUNABLES` with any `glibc.malloc.` tunable (or `MALLOC_MMAP_THRESHOLD_` /
//! `MALLOC_TRIM_THRESHOLD_`) to keep glibc's own settings instead.

/// What [`tune`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuned {
    /// The fast bins are off.
    Set,
    /// The environment sets malloc tunables: left alone.
    UserSettings,
    /// Not glibc, or glibc refused.
    Unsupported,
}

/// Sets the heap parameters for a host process. Call first thing in `main`, before threads
/// start allocating.
pub fn tune() -> Tuned {
    if user_settings() {
        return Tuned::UserSettings;
    }
    set_params()
}

/// Whether the environment sets glibc's malloc parameters itself.
fn user_settings() -> bool {
    std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
        || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_params() -> Tuned {
    // SAFETY: mallopt only changes allocator parameters; 0 is in range for M_MXFAST (it
    // disables the fast bins; chunks already in them are consolidated on the next merge).
    let ok = unsafe { libc::mallopt(libc::M_MXFAST, 0) == 1 };
    if ok { Tuned::Set } else { Tuned::Unsupported }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_params() -> Tuned {
    Tuned::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tune_sets_the_heap_or_defers_to_the_environment() {
        let r = tune();
        if user_settings() {
            assert_eq!(r, Tuned::UserSettings);
        } else if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(r, Tuned::Set);
            // Small and large allocations still work, and freed ones are reused.
            for _ in 0..1000 {
                let small: Vec<Box<[u8; 48]>> = (0..64).map(|i| Box::new([i as u8; 48])).collect();
                let big = vec![3u8; 10 << 10];
                assert_eq!(small[63][0], 63);
                assert_eq!(big[(10 << 10) - 1], 3);
            }
        }
    }
}
