//! Who may use the export, and as whom: the client allow-list and the mapping of RPC
//! credentials (AUTH_UNIX / AUTH_NULL) to the graph's call context, with root squash.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use nfs3_types::rpc::auth_unix;
use xlator_api::Ctx;

/// `nobody`/`nogroup`: what squashed and anonymous callers become (as in Linux knfsd).
pub const ANON_ID: u32 = 65534;
/// Supplementary groups taken from an AUTH_UNIX credential (RFC 5531 allows 16).
const MAX_GROUPS: usize = 16;

/// One allow-list entry: an address, a CIDR block, or `*` for everyone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Allow {
    Any,
    Net { addr: IpAddr, prefix: u8 },
}

impl Allow {
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match *self {
            Allow::Any => true,
            Allow::Net { addr, prefix } => match (addr, ip) {
                (IpAddr::V4(a), IpAddr::V4(b)) => prefix_eq(
                    u128::from(u32::from(a)),
                    u128::from(u32::from(b)),
                    prefix,
                    32,
                ),
                (IpAddr::V6(a), IpAddr::V6(b)) => {
                    prefix_eq(u128::from(a), u128::from(b), prefix, 128)
                }
                _ => false,
            },
        }
    }
}

/// IPv4-mapped IPv6 peers (`::ffff:a.b.c.d`, from a dual-stack socket) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn prefix_eq(a: u128, b: u128, prefix: u8, bits: u8) -> bool {
    let shift = u32::from(bits - prefix.min(bits));
    if shift >= u32::from(bits) {
        return true;
    }
    (a >> shift) == (b >> shift)
}

impl FromStr for Allow {
    type Err = String;
    fn from_str(s: &str) -> Result<Allow, String> {
        let s = s.trim();
        if s == "*" {
            return Ok(Allow::Any);
        }
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an address, a CIDR block (10.0.0.0/8) or `*`"))?;
        let addr = canonical(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{s:?}: the prefix length must be 0..={max}")),
            },
        };
        Ok(Allow::Net { addr, prefix })
    }
}

impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allow::Any => f.write_str("*"),
            Allow::Net { addr, prefix } => write!(f, "{addr}/{prefix}"),
        }
    }
}

/// The export's access rules.
#[derive(Clone, Debug)]
pub struct ExportPolicy {
    pub allow: Vec<Allow>,
    /// Map uid 0 (and gid 0) to [`ANON_ID`].
    pub root_squash: bool,
    /// Map every caller to [`ANON_ID`].
    pub all_squash: bool,
}

impl ExportPolicy {
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|a| a.matches(ip))
    }

    /// The call context for a credential (`None`: AUTH_NULL or another flavor, served as the
    /// anonymous user).
    pub fn ctx(&self, auth: Option<&auth_unix>, request_id: u64) -> Ctx {
        let (uid, gid, groups) = self.identity(auth);
        Ctx::builder(uid, gid)
            .groups(&groups)
            .request_id(request_id)
            .build()
    }

    /// `(uid, gid, supplementary groups)` after squashing.
    pub fn identity(&self, auth: Option<&auth_unix>) -> (u32, u32, Vec<u32>) {
        let Some(a) = auth else {
            return (ANON_ID, ANON_ID, Vec::new());
        };
        if self.all_squash {
            return (ANON_ID, ANON_ID, Vec::new());
        }
        let squash = |id: u32| {
            if self.root_squash && id == 0 {
                ANON_ID
            } else {
                id
            }
        };
        let mut groups: Vec<u32> = a.gids.iter().take(MAX_GROUPS).map(|&g| squash(g)).collect();
        groups.sort_unstable();
        groups.dedup();
        (squash(a.uid), squash(a.gid), groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(uid: u32, gid: u32, gids: &[u32]) -> auth_unix {
        auth_unix {
            uid,
            gid,
            gids: gids.to_vec(),
            ..auth_unix::default()
        }
    }

    #[test]
    fn allow_list_parsing_and_matching() {
        let a: Allow = "10.0.0.0/8".parse().expect("cidr");
        assert!(a.matches("10.1.2.3".parse().expect("ip")));
        assert!(!a.matches("11.0.0.1".parse().expect("ip")));
        let one: Allow = "127.0.0.1".parse().expect("ip");
        assert!(one.matches("127.0.0.1".parse().expect("ip")));
        assert!(one.matches("::ffff:127.0.0.1".parse().expect("mapped")));
        assert!(!one.matches("127.0.0.2".parse().expect("ip")));
        let all: Allow = "0.0.0.0/0".parse().expect("all v4");
        assert!(all.matches("192.168.1.1".parse().expect("ip")));
        assert!(!all.matches("::1".parse().expect("v6")));
        assert_eq!("*".parse::<Allow>(), Ok(Allow::Any));
        let v6: Allow = "fd00::/8".parse().expect("v6 cidr");
        assert!(v6.matches("fd12::1".parse().expect("ip")));
        assert!("10.0.0.0/33".parse::<Allow>().is_err());
        assert!("host.example".parse::<Allow>().is_err());
        assert_eq!(a.to_string(), "10.0.0.0/8");
    }

    #[test]
    fn squashing() {
        let p = ExportPolicy {
            allow: vec![Allow::Any],
            root_squash: true,
            all_squash: false,
        };
        assert_eq!(
            p.identity(Some(&unix(0, 0, &[0, 5]))),
            (ANON_ID, ANON_ID, vec![5, ANON_ID])
        );
        assert_eq!(
            p.identity(Some(&unix(1000, 100, &[100, 27]))),
            (1000, 100, vec![27, 100])
        );
        assert_eq!(p.identity(None), (ANON_ID, ANON_ID, vec![]));
        let no = ExportPolicy {
            root_squash: false,
            ..p.clone()
        };
        assert_eq!(no.identity(Some(&unix(0, 0, &[]))), (0, 0, vec![]));
        let all = ExportPolicy {
            all_squash: true,
            ..p
        };
        assert_eq!(
            all.identity(Some(&unix(1000, 100, &[1]))),
            (ANON_ID, ANON_ID, vec![])
        );
        let cx = no.ctx(Some(&unix(7, 8, &[9])), 42);
        assert_eq!(
            (cx.uid(), cx.gid(), cx.groups(), cx.request_id()),
            (7, 8, &[9][..], 42)
        );
    }
}
