//! One xlfsd per brick directory. Two brick processes on one directory would each keep their
//! own view of it (GFID handles, unlinked files waiting for the reaper, locks granted to their
//! clients) and corrupt each other's. So before it builds its graph, xlfsd takes an exclusive
//! `flock` on `<directory>/.xlfs/xlfsd.lock` (the brick's private area, 0700, created if
//! missing) for every storage/posix in its volfile, and writes its pid there. A second xlfsd
//! finds the lock held and exits with one line naming the pid that holds it. The kernel drops
//! the lock when the process ends, however it ends (kill -9 included), so a restart after a
//! crash never finds a stale lock; the pid in the file is only for that message.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use xlfs_core::volfile::Volfile;

/// The lock file's name inside the brick's private directory.
pub const LOCK_FILE: &str = "xlfsd.lock";

/// Held locks; dropping releases them (the process's end does too).
pub struct BrickLocks {
    _files: Vec<File>,
}

/// Why a brick directory could not be locked. The message is meant for the user.
#[derive(thiserror::Error, Debug)]
pub enum LockError {
    #[error(
        "brick directory {dir} is already served by another xlfsd ({holder}, holding {lock}): \
         stop it first, or serve another directory"
    )]
    Held {
        dir: String,
        holder: String,
        lock: String,
    },
    #[error("cannot lock brick directory {dir} ({lock}): {source}")]
    Io {
        dir: String,
        lock: String,
        #[source]
        source: std::io::Error,
    },
}

/// The brick directories (storage/posix `directory` options) of `vf`.
pub fn brick_dirs(vf: &Volfile) -> Vec<PathBuf> {
    vf.volumes
        .iter()
        .filter(|v| v.type_name == "storage/posix")
        .filter_map(|v| v.option("directory"))
        .filter(|d| !d.trim().is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Locks every brick directory of `vf`. A directory that does not exist is skipped:
/// storage/posix refuses it with its own message.
pub fn lock_bricks(vf: &Volfile) -> Result<BrickLocks, LockError> {
    let mut files = Vec::new();
    for dir in brick_dirs(vf) {
        if dir.is_dir() {
            files.push(lock_one(&dir)?);
        }
    }
    Ok(BrickLocks { _files: files })
}

/// Takes the lock of one brick directory and writes this process's pid into it.
pub fn lock_one(dir: &Path) -> Result<File, LockError> {
    let private = dir.join(xlfs_posix::META_DIR);
    let lock = private.join(LOCK_FILE);
    let io = |source| LockError::Io {
        dir: dir.display().to_string(),
        lock: lock.display().to_string(),
        source,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&private) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(e)),
        _ => {}
    }
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&lock)
        .map_err(io)?;
    // SAFETY: a valid fd; flock takes no pointers.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(e));
        }
        let mut text = String::new();
        let _ = f.read_to_string(&mut text);
        let holder = match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "pid unknown".into(),
        };
        return Err(LockError::Held {
            dir: dir.display().to_string(),
            holder,
            lock: lock.display().to_string(),
        });
    }
    f.set_len(0).map_err(io)?;
    f.rewind().map_err(io)?;
    writeln!(f, "{}", std::process::id()).map_err(io)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_freed_on_drop() {
        let d = tempfile::tempdir().expect("tempdir");
        let first = lock_one(d.path()).expect("first");
        let text = std::fs::read_to_string(d.path().join(xlfs_posix::META_DIR).join(LOCK_FILE))
            .expect("read");
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file: a second open in this process conflicts too.
        let e = lock_one(d.path()).expect_err("held");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())) && !msg.contains('\n'),
            "{msg}"
        );
        drop(first);
        lock_one(d.path()).expect("free again");
    }

    #[test]
    fn finds_the_brick_directories_of_a_volfile() {
        let vf = Volfile::parse(
            r#"(volumes: [
                (name: "a", type: "storage/posix", options: { "directory": "/b1" }),
                (name: "l", type: "features/locks", subvolumes: ["a"]),
                (name: "s", type: "protocol/server", subvolumes: ["l"]),
            ])"#,
            "<test>",
        )
        .expect("volfile");
        assert_eq!(brick_dirs(&vf), [PathBuf::from("/b1")]);
    }
}
