//! Child processes (bricks, mounts): spawning detached, liveness, stopping, mount checks.
//! The only `unsafe` of the CLI is here (`kill(2)`).

use std::ffi::OsString;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{CliError, Result};

/// Starts `program args` in its own process group (so a Ctrl-C at the terminal reaches
/// only `xlfs`, which stops its children in order), output appended to `log`.
pub fn spawn_detached(program: &Path, args: &[OsString], log: &Path) -> Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(CliError::io(log))?;
    let err = out.try_clone().map_err(CliError::io(log))?;
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::Process(format!("cannot run {}: {e}", program.display())))
}

/// Whether `pid` is a live (not zombie) process whose command line mentions `name`, so a
/// reused pid is not mistaken for our brick.
pub fn alive(pid: u32, name: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name.
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    if matches!(state, None | Some('Z') | Some('X')) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains(name)
}

/// Whether `pid` is a zombie: dead, not yet reaped by its parent (an orphan waits for init).
pub fn zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    matches!(state, Some('Z'))
}

/// Restores the default SIGPIPE action, so `xlfs ... | head` ends quietly instead of
/// failing on a closed stdout.
pub fn default_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Sends `sig` to `pid`; false if there is no such process.
pub fn signal(pid: u32, sig: i32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; pid > 0 names one
    // process, never a group.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// SIGTERM, then SIGKILL after `grace`; returns false if it had to be killed.
pub fn terminate(pid: u32, name: &str, grace: Duration) -> bool {
    if !alive(pid, name) {
        return true;
    }
    signal(pid, libc::SIGTERM);
    if wait_for(grace, || !alive(pid, name)) {
        return true;
    }
    signal(pid, libc::SIGKILL);
    wait_for(Duration::from_secs(5), || !alive(pid, name));
    false
}

/// Polls `done` every 50 ms until it is true or `timeout` passes.
pub fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether something accepts TCP connections on `host:port`.
pub fn port_open(host: &str, port: u16) -> bool {
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

/// Whether a port can be bound on `host` (nobody listens there).
pub fn port_free(host: &str, port: u16) -> bool {
    std::net::TcpListener::bind((host, port)).is_ok()
}

/// The mount points in /proc/self/mountinfo (escapes decoded).
fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| {
            PathBuf::from(
                p.replace("\\040", " ")
                    .replace("\\011", "\t")
                    .replace("\\134", "\\"),
            )
        })
        .collect()
}

/// Whether `path` is a mount point.
pub fn is_mounted(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    mount_points().contains(&path)
}

/// Detaches the mount at `path` (`umount -l`), the last resort for a stuck FUSE mount.
pub fn lazy_unmount(path: &Path) -> bool {
    let ok = |prog: &str, args: &[&str]| {
        Command::new(prog)
            .args(args)
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    ok("umount", &["-l"]) || ok("fusermount3", &["-u", "-z"]) || ok("fusermount", &["-u", "-z"])
}

/// The last `n` lines of a log, indented, for error messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(n)..];
    if tail.is_empty() {
        return format!("  (no output; log {})", path.display());
    }
    let mut out: Vec<String> = tail.iter().map(|l| format!("  | {l}")).collect();
    out.push(format!("  (full log: {})", path.display()));
    out.join("\n")
}

/// The names this machine answers to, for deciding which bricks are local.
pub fn local_host_names() -> Vec<String> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim().to_ascii_lowercase();
        if let Some((short, _)) = h.split_once('.') {
            names.push(short.to_owned());
        }
        names.push(h);
    }
    names.extend(interface_addresses());
    names
}

/// The addresses of this host's interfaces (of its network namespace): a brick named by one
/// of them is this host's.
fn interface_addresses() -> Vec<String> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family says its real type.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).to_string());
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).to_string());
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}
