//! Hosts as network namespaces: one namespace per host, each with one veth into a bridge
//! that lives in a namespace of its own, addresses only inside those namespaces (never on
//! this machine's interfaces). Partitions are blackhole routes inside a host's namespace
//! (its packets to that address are dropped: the connection dies by ping-timeout, new ones
//! fail). Everything is removed when the [`Net`] is dropped, also when a test fails.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Runs `ip ARGS` (optionally inside namespace `ns`); panics with its output on failure.
fn ip(ns: Option<&str>, args: &[&str]) {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["netns", "exec", ns, "ip"]);
    }
    let out = c.args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?} (in {ns:?}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether namespaces can be made here (root, iproute2, kernel support).
pub fn available() -> Result<(), String> {
    let name = format!("xlprobe{}", std::process::id());
    let out = Command::new("ip")
        .args(["netns", "add", &name])
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip netns add: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let _ = Command::new("ip").args(["netns", "del", &name]).status();
    Ok(())
}

/// A set of hosts on one bridge, subnet 10.231.`subnet`.0/24; host `i` is `.i+1`.
pub struct Net {
    prefix: String,
    hosts: Vec<String>,
    subnet: u8,
}

impl Net {
    /// `hosts` namespaces (named after `tag` and this process) on one new bridge.
    pub fn new(tag: &str, hosts: usize, subnet: u8) -> Net {
        let prefix = format!("xl{}{tag}", std::process::id() % 100_000);
        let net = Net {
            hosts: (0..hosts).map(|i| format!("{prefix}h{i}")).collect(),
            prefix,
            subnet,
        };
        let br = net.bridge_ns();
        ip(None, &["netns", "add", &br]);
        ip(Some(&br), &["link", "set", "lo", "up"]);
        ip(Some(&br), &["link", "add", "br0", "type", "bridge"]);
        ip(Some(&br), &["link", "set", "br0", "up"]);
        for (i, ns) in net.hosts.iter().enumerate() {
            ip(None, &["netns", "add", ns]);
            ip(Some(ns), &["link", "set", "lo", "up"]);
            let (h, b) = (format!("eth{i}"), format!("p{i}"));
            ip(
                None,
                &[
                    "link", "add", "name", &h, "netns", ns, "type", "veth", "peer", "name", &b,
                    "netns", &br,
                ],
            );
            ip(Some(&br), &["link", "set", &b, "master", "br0"]);
            ip(Some(&br), &["link", "set", &b, "up"]);
            let addr = format!("{}/24", net.addr(i));
            ip(Some(ns), &["addr", "add", &addr, "dev", &h]);
            ip(Some(ns), &["link", "set", &h, "up"]);
        }
        net
    }

    fn bridge_ns(&self) -> String {
        format!("{}br", self.prefix)
    }

    /// Host `i`'s address.
    pub fn addr(&self, i: usize) -> String {
        format!("10.231.{}.{}", self.subnet, i + 1)
    }

    /// Host `i`'s namespace name.
    pub fn ns(&self, i: usize) -> &str {
        &self.hosts[i]
    }

    /// A command that runs `program` in host `i`'s network namespace only (the mount
    /// namespace stays this machine's, so a FUSE mount made there is visible here).
    pub fn command(&self, i: usize, program: &PathBuf) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.hosts[i]))
            .arg("--")
            .arg(program);
        c
    }

    /// Host `from` can no longer reach host `to` (its packets to it are dropped).
    pub fn cut(&self, from: usize, to: usize) {
        let dst = format!("{}/32", self.addr(to));
        ip(Some(self.ns(from)), &["route", "add", "blackhole", &dst]);
    }

    /// Undoes [`Net::cut`].
    pub fn mend(&self, from: usize, to: usize) {
        let dst = format!("{}/32", self.addr(to));
        ip(Some(self.ns(from)), &["route", "del", "blackhole", &dst]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(std::iter::once(&self.bridge_ns())) {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A process killed (SIGKILL) and reaped when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
