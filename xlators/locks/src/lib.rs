//! features/locks: POSIX byte-range locks and internal inode/entry locks
