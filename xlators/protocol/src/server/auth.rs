//! Access control at handshake: the address allow-list (the secret: [`crate::creds`]).

use std::net::IpAddr;

/// One `auth-allow` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Any,
    Net { addr: IpAddr, prefix: u8 },
}

/// A parsed `auth-allow` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowList {
    rules: Vec<Rule>,
    text: String,
}

impl AllowList {
    /// Parses `*`, `ADDR` and `ADDR/PREFIX` entries separated by commas.
    pub fn parse(text: &str) -> Result<AllowList, String> {
        let mut rules = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                rules.push(Rule::Any);
                continue;
            }
            let (a, p) = match item.split_once('/') {
                Some((a, p)) => (a, Some(p)),
                None => (item, None),
            };
            let addr: IpAddr = a.parse().map_err(|_| {
                format!("auth-allow: {item:?} is not an address, a network (10.0.0.0/8) or *")
            })?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let prefix = match p {
                None => max,
                Some(p) => match p.parse::<u8>() {
                    Ok(n) if n <= max => n,
                    _ => return Err(format!("auth-allow: {item:?} has a bad prefix length")),
                },
            };
            rules.push(Rule::Net { addr, prefix });
        }
        if rules.is_empty() {
            return Err("auth-allow is empty: use * to allow every address".into());
        }
        Ok(AllowList {
            rules,
            text: text.trim().to_owned(),
        })
    }

    pub fn allows(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        self.rules.iter().any(|r| match r {
            Rule::Any => true,
            Rule::Net { addr, prefix } => in_net(peer, canonical(*addr), *prefix),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`, from dual-stack sockets) as IPv4.
fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => a,
        },
        v4 => v4,
    }
}

fn in_net(peer: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let (p, n, bits) = match (peer, net) {
        (IpAddr::V4(p), IpAddr::V4(n)) => (u32::from(p) as u128, u32::from(n) as u128, 32u32),
        (IpAddr::V6(p), IpAddr::V6(n)) => (u128::from(p), u128::from(n), 128u32),
        _ => return false,
    };
    let prefix = u32::from(prefix);
    if prefix == 0 {
        return true;
    }
    let shift = bits - prefix;
    (p >> shift) == (n >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn lists_networks_and_wildcards() {
        let l = AllowList::parse("10.0.0.0/8, 192.168.1.7 ,::1").expect("parse");
        assert!(l.allows(ip("10.2.3.4")));
        assert!(l.allows(ip("::ffff:10.2.3.4")));
        assert!(l.allows(ip("192.168.1.7")));
        assert!(!l.allows(ip("192.168.1.8")));
        assert!(l.allows(ip("::1")));
        assert!(!l.allows(ip("127.0.0.1")));
        assert!(AllowList::parse("*").expect("any").allows(ip("8.8.8.8")));
        assert!(
            AllowList::parse("0.0.0.0/0")
                .expect("all v4")
                .allows(ip("8.8.8.8"))
        );
        assert!(AllowList::parse("10.0.0.0/33").is_err());
        assert!(AllowList::parse("host.example").is_err());
        assert!(AllowList::parse(" , ").is_err());
    }
}
