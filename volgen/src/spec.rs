//! The volume description: what a user says about a volume, stored as RON.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::brick::Brick;
use crate::error::VolgenError;

/// The first brick port when none is given (GlusterFS's brick range starts here too).
pub const DEFAULT_BASE_PORT: u16 = 49152;

/// A volume: name, bricks, layout, transport, access control and option overrides.
///
/// Brick `i` listens on `transport.base_port + i`. Bricks are grouped in order: `replica`
/// consecutive bricks form a replica set, `stripe` consecutive replica sets form a stripe,
/// and the volume distributes over the stripes (GlusterFS's order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    pub name: String,
    pub bricks: Vec<Brick>,
    /// Copies of each file (1: no replication).
    #[serde(default = "one")]
    pub replica: u32,
    /// Bricks (replica sets) each file is striped over (1: no striping).
    #[serde(default = "one")]
    pub stripe: u32,
    #[serde(default)]
    pub transport: Transport,
    /// Client addresses the bricks accept (empty: the brick's own default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_allow: Vec<String>,
    /// Shared secret checked when a client connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `volume set` overrides by full key (`performance.write-behind.window-size`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// Where the bricks listen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// Address the bricks bind; default: 127.0.0.1 for local bricks, 0.0.0.0 for `host:/path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_host: Option<String>,
    /// Port of brick 0; brick `i` uses `base_port + i`.
    #[serde(default = "default_port")]
    pub base_port: u16,
}

impl Default for Transport {
    fn default() -> Transport {
        Transport {
            listen_host: None,
            base_port: DEFAULT_BASE_PORT,
        }
    }
}

fn one() -> u32 {
    1
}

fn default_port() -> u16 {
    DEFAULT_BASE_PORT
}

impl VolumeSpec {
    /// A plain or distributed volume over `bricks` with default transport and no overrides.
    pub fn new(name: &str, bricks: Vec<Brick>) -> VolumeSpec {
        VolumeSpec {
            name: name.to_owned(),
            bricks,
            replica: 1,
            stripe: 1,
            transport: Transport::default(),
            auth_allow: Vec::new(),
            secret: None,
            options: BTreeMap::new(),
        }
    }

    /// The shape of the volume.
    pub fn layout(&self) -> Layout {
        Layout {
            bricks: self.bricks.len(),
            replica: self.replica,
            stripe: self.stripe,
        }
    }

    /// The port brick `index` listens on (saturating; [`VolumeSpec::check`] rejects overflow).
    pub fn brick_port(&self, index: usize) -> u16 {
        let port = usize::from(self.transport.base_port).saturating_add(index);
        u16::try_from(port).unwrap_or(u16::MAX)
    }

    /// Every port the volume's bricks use.
    pub fn ports(&self) -> std::ops::RangeInclusive<u32> {
        let base = u32::from(self.transport.base_port);
        base..=base + self.bricks.len().saturating_sub(1) as u32
    }

    /// The description as pretty RON (fields in declaration order, options sorted).
    pub fn to_ron(&self) -> String {
        let cfg = ron::ser::PrettyConfig::new()
            .indentor("    ")
            .struct_names(false);
        // Serializing plain strings, numbers and maps cannot fail.
        let mut text = ron::ser::to_string_pretty(self, cfg).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parses a description; `origin` names the file in errors.
    pub fn from_ron(text: &str, origin: &Path) -> Result<VolumeSpec, VolgenError> {
        ron::from_str(text).map_err(|e| VolgenError::SpecSyntax {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Reads a description from `path`.
    pub fn load(path: &Path) -> Result<VolumeSpec, VolgenError> {
        let text = std::fs::read_to_string(path).map_err(|source| VolgenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        VolumeSpec::from_ron(&text, path)
    }
}

/// Replica sets of `replica` bricks, stripes of `stripe` sets, distributed over the stripes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub bricks: usize,
    pub replica: u32,
    pub stripe: u32,
}

impl Layout {
    /// Bricks in one distribute subvolume: `replica x stripe`.
    pub fn set_size(&self) -> usize {
        (self.replica as usize).saturating_mul(self.stripe as usize)
    }

    /// Number of distribute subvolumes (1: no distribute layer).
    pub fn distribute(&self) -> usize {
        self.bricks / self.set_size().max(1)
    }
}

impl fmt::Display for Layout {
    /// `plain`, `distribute 3`, `replica 2`, `distribute 2 x stripe 2 x replica 2`...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.distribute() > 1 {
            parts.push(format!("distribute {}", self.distribute()));
        }
        if self.stripe > 1 {
            parts.push(format!("stripe {}", self.stripe));
        }
        if self.replica > 1 {
            parts.push(format!("replica {}", self.replica));
        }
        if parts.is_empty() {
            f.write_str("plain")
        } else {
            f.write_str(&parts.join(" x "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bricks: &[&str]) -> VolumeSpec {
        let bricks = bricks
            .iter()
            .map(|b| Brick::parse(b).expect("brick"))
            .collect();
        VolumeSpec::new("gv0", bricks)
    }

    #[test]
    fn ron_round_trips() {
        let mut s = spec(&["/data/b1", "h2:/data/b2"]);
        s.options
            .insert("debug.io-stats.dump-interval".into(), "10s".into());
        s.secret = Some("s3cret".into());
        let text = s.to_ron();
        assert!(text.contains("bricks: [\n        \"/data/b1\",\n        \"h2:/data/b2\",\n"));
        assert_eq!(
            VolumeSpec::from_ron(&text, Path::new("x")).expect("parses"),
            s
        );
    }

    #[test]
    fn minimal_ron_fills_defaults() {
        let s =
            VolumeSpec::from_ron(r#"(name: "v", bricks: ["/b"])"#, Path::new("x")).expect("parses");
        assert_eq!(s, spec(&["/b"]).renamed("v"));
        assert_eq!(s.brick_port(0), DEFAULT_BASE_PORT);
    }

    #[test]
    fn bad_ron_names_file_and_problem() {
        let e = VolumeSpec::from_ron(r#"(name: "v", bricks: ["rel"])"#, Path::new("/s/v.ron"))
            .expect_err("relative brick");
        let msg = e.to_string();
        assert!(
            msg.starts_with("/s/v.ron: not a valid volume description:"),
            "{msg}"
        );
        assert!(msg.contains("relative"), "{msg}");
        let e = VolumeSpec::from_ron(r#"(name: "v", bricks: [], colour: 1)"#, Path::new("f"))
            .expect_err("unknown field");
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn layouts_describe_themselves() {
        let l = |bricks, replica, stripe| {
            Layout {
                bricks,
                replica,
                stripe,
            }
            .to_string()
        };
        assert_eq!(l(1, 1, 1), "plain");
        assert_eq!(l(3, 1, 1), "distribute 3");
        assert_eq!(l(2, 2, 1), "replica 2");
        assert_eq!(l(4, 2, 1), "distribute 2 x replica 2");
        assert_eq!(l(8, 2, 2), "distribute 2 x stripe 2 x replica 2");
    }

    impl VolumeSpec {
        fn renamed(mut self, name: &str) -> VolumeSpec {
            self.name = name.into();
            self
        }
    }
}
