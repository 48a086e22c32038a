//! Heap settings for the host processes.
//!
//! Bulk fops move payloads of 128 KiB to 1 MiB through short-lived buffers: a brick reads
//! into one, a client receives into one, each freed once the reply is written out. With
//! glibc's defaults each such buffer is a fresh `mmap` (or, once the dynamic threshold has
//! grown, heap memory handed back to the kernel by trimming soon after), so every read
//! faults its buffer's pages in again and the kernel zeroes and charges them: about 9% of
//! all CPU time in the concurrent-readers benchmark (W4). [`tune`] keeps such buffers in the
//! heap and lets freed memory stay for reuse.
//!
//! Set `GLIBC_TUNABLES` with any `glibc.malloc.` tunable (or `MALLOC_MMAP_THRESHOLD_` /
//! `MALLOC_TRIM_THRESHOLD_`) to keep glibc's own settings instead.

/// Allocations below this come from the heap (the largest frame payload is 1 MiB, plus
/// header and alignment).
pub const MMAP_THRESHOLD: usize = 4 << 20;

/// Free memory at the top of a heap beyond this goes back to the kernel.
pub const TRIM_THRESHOLD: usize = 64 << 20;

/// What [`tune`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuned {
    /// The thresholds above are set.
    Set,
    /// The environment sets malloc tunables: left alone.
    UserSettings,
    /// Not glibc, or glibc refused.
    Unsupported,
}

/// Sets the heap thresholds for a host process. Call first thing in `main`, before threads
/// start allocating.
pub fn tune() -> Tuned {
    if user_settings() {
        return Tuned::UserSettings;
    }
    set_thresholds()
}

/// Whether the environment sets glibc's malloc thresholds itself.
fn user_settings() -> bool {
    std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
        || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> Tuned {
    // SAFETY: mallopt only changes allocator parameters; both values are in range (the mmap
    // threshold must not exceed HEAP_MAX_SIZE / 2, 32 MiB on 64-bit).
    let ok = unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as libc::c_int) == 1
    };
    if ok { Tuned::Set } else { Tuned::Unsupported }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> Tuned {
    Tuned::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tune_sets_thresholds_or_defers_to_the_environment() {
        let r = tune();
        if user_settings() {
            assert_eq!(r, Tuned::UserSettings);
        } else if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(r, Tuned::Set);
            // The heap now serves a payload-sized buffer: it is reused, not unmapped.
            let a = vec![1u8; 1 << 20];
            let p = a.as_ptr() as usize;
            drop(a);
            let b = vec![2u8; 1 << 20];
            assert_eq!(
                b.as_ptr() as usize,
                p,
                "a freed 1 MiB buffer is handed out again"
            );
        }
    }
}
