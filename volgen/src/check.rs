//! Checks of a volume description that need no translator types: name, bricks, counts,
//! ports, auth entries. Option overrides are checked against the schemas by
//! [`Catalog`](crate::Catalog).

use crate::error::VolgenError;
use crate::spec::VolumeSpec;

/// Longest volume name; it prefixes translator names and names a state directory.
pub const MAX_NAME_LEN: usize = 64;

impl VolumeSpec {
    /// Rejects a description that cannot become a volume, with the first problem found:
    /// the name, the bricks (valid, not repeated, not nested), replica/stripe vs brick
    /// count, ports and auth entries.
    pub fn check(&self) -> Result<(), VolgenError> {
        check_name(&self.name)?;
        if self.bricks.is_empty() {
            return Err(VolgenError::NoBricks {
                volume: self.name.clone(),
            });
        }
        for (j, b) in self.bricks.iter().enumerate() {
            for (i, a) in self.bricks[..j].iter().enumerate() {
                if a.same_dir(b) {
                    let brick = b.to_string();
                    return Err(VolgenError::DuplicateBrick {
                        brick,
                        first: i,
                        second: j,
                    });
                }
                let (outer, inner) = if a.contains(b) {
                    (a, b)
                } else if b.contains(a) {
                    (b, a)
                } else {
                    continue;
                };
                let (inner, outer) = (inner.to_string(), outer.to_string());
                return Err(VolgenError::NestedBrick { inner, outer });
            }
        }
        for (what, n) in [("replica", self.replica), ("stripe", self.stripe)] {
            if n == 0 {
                return Err(VolgenError::ZeroCount { what });
            }
        }
        if self.arbiter > 1 || (self.arbiter == 1 && self.replica != 3) {
            return Err(VolgenError::BadArbiter {
                replica: self.replica,
                arbiter: self.arbiter,
            });
        }
        let layout = self.layout();
        let set = layout.set_size();
        if !self.bricks.len().is_multiple_of(set) {
            let mut shape = Vec::new();
            if self.stripe > 1 {
                shape.push(format!("stripe {}", self.stripe));
            }
            if self.replica > 1 {
                shape.push(format!("replica {}", self.replica));
            }
            return Err(VolgenError::BrickCount {
                bricks: self.bricks.len(),
                replica: self.replica,
                stripe: self.stripe,
                set,
                layout: shape.join(" x "),
            });
        }
        self.check_ids()?;
        let base = self.transport.base_port;
        let span = self.ports().count();
        if base == 0 || usize::from(base) + span - 1 > usize::from(u16::MAX) {
            return Err(VolgenError::PortRange { base, bricks: span });
        }
        for entry in &self.auth_allow {
            check_auth_entry(entry)?;
        }
        Ok(())
    }
}

impl VolumeSpec {
    /// `brick_ids`: one per brick, increasing, each distribute subvolume's ids consecutive
    /// from a multiple of its size (so replica sets and stripes keep their names).
    fn check_ids(&self) -> Result<(), VolgenError> {
        if self.brick_ids.is_empty() {
            return Ok(());
        }
        let bad = |reason: String| {
            Err(VolgenError::BadBrickIds {
                volume: self.name.clone(),
                reason,
            })
        };
        if self.brick_ids.len() != self.bricks.len() {
            return bad(format!(
                "{} ids for {} bricks",
                self.brick_ids.len(),
                self.bricks.len()
            ));
        }
        if let Some(w) = self.brick_ids.windows(2).find(|w| w[0] >= w[1]) {
            return bad(format!("ids must increase ({} then {})", w[0], w[1]));
        }
        let set = self.layout().set_size().max(1);
        for (k, group) in self.brick_ids.chunks(set).enumerate() {
            let first = group[0] as usize;
            let consecutive = group
                .iter()
                .enumerate()
                .all(|(j, id)| *id as usize == first + j);
            if !first.is_multiple_of(set) || !consecutive {
                return bad(format!(
                    "subvolume {k} has ids {group:?}; a subvolume of {set} bricks needs \
                     consecutive ids from a multiple of {set}"
                ));
            }
        }
        Ok(())
    }
}

/// A volume name: letters, digits, `-` and `_`, starting with a letter or digit.
pub fn check_name(name: &str) -> Result<(), VolgenError> {
    let bad = |reason: &str| {
        Err(VolgenError::BadName {
            name: name.into(),
            reason: reason.into(),
        })
    };
    if name.is_empty() {
        return bad("it is empty; give the volume a name such as gv0");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("it is longer than 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return bad("it must start with a letter or a digit");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_".contains(*c)))
    {
        return Err(VolgenError::BadName {
            name: name.into(),
            reason: format!("{c:?} is not allowed; use letters, digits, `-` and `_`"),
        });
    }
    if name.eq_ignore_ascii_case("all") {
        return bad("`all` is reserved (it means every volume)");
    }
    Ok(())
}

/// An allow-list entry, as protocol/server reads it: `*`, an address (`10.0.0.7`, `::1`) or
/// a network (`10.0.0.0/8`, `fd00::/8`).
pub fn check_auth_entry(entry: &str) -> Result<(), VolgenError> {
    let ok = entry == "*"
        || match entry.split_once('/') {
            None => entry.parse::<std::net::IpAddr>().is_ok(),
            Some((addr, len)) => match (addr.parse::<std::net::IpAddr>(), len.parse::<u8>()) {
                (Ok(std::net::IpAddr::V4(_)), Ok(n)) => n <= 32,
                (Ok(std::net::IpAddr::V6(_)), Ok(n)) => n <= 128,
                _ => false,
            },
        };
    if ok {
        Ok(())
    } else {
        Err(VolgenError::BadAuth {
            entry: entry.into(),
            reason: "write `*`, an address such as 10.0.0.7 or a network such as 10.0.0.0/8".into(),
        })
    }
}
