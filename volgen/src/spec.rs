//! The volume description: what a user says about a volume, stored as RON.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::brick::Brick;
use crate::error::VolgenError;

/// The first brick port when none is given (GlusterFS's brick range starts here too).
pub const DEFAULT_BASE_PORT: u16 = 49152;

/// A volume: name, bricks, layout, transport, access control and option overrides.
///
/// Every brick has an id (see [`VolumeSpec::brick_ids`]; by default its position): brick id
/// `n` listens on `transport.base_port + n`, exports `<vol>-brick-<n>` and is the client's
/// `<vol>-client-<n>`. Bricks are grouped in order: `replica` consecutive bricks form a
/// replica set, `stripe` consecutive replica sets form a stripe, and the volume distributes
/// over the stripes (GlusterFS's order).
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
    /// 1: the last brick of each replica set is an arbiter (`replica 3 arbiter 1`): names,
    /// metadata and replication counters, no file data.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub arbiter: u32,
    #[serde(default)]
    pub transport: Transport,
    /// Client addresses the bricks accept (empty: the brick's own default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_allow: Vec<String>,
    /// Shared secret checked when a client connects, written inline into the volfiles
    /// (volumes made before secret files; prefer `secret_file`). Not with `secret_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The file holding the volume's secret (first line, mode 0600): the volfiles name it
    /// (`secret-file`) instead of carrying the secret. `xlfs volume create` makes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// `volume set` overrides by full key (`performance.write-behind.window-size`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// The id of each brick, in brick order, once bricks were removed (`remove-brick
    /// commit`); empty: brick `i` has id `i`. Ids keep translator names (`<vol>-client-<n>`,
    /// `<vol>-replicate-<k>`), ports and state files stable when bricks go:
    /// cluster/distribute's link files and layouts, and replicate's pending counters, name
    /// the children. Ids increase and every distribute subvolume's bricks have consecutive
    /// ids starting at a multiple of `replica x stripe`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brick_ids: Vec<u32>,
    /// The lowest id a brick added later may take: removed ids are not given out again (a
    /// removed brick's directory still holds data that names its old child). 0: one past the
    /// highest id.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub next_brick_id: u32,
}

/// One child of the volume's distribute layer (the whole volume when it does not
/// distribute): its translator name in the client volfile and its bricks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subvolume {
    /// `<vol>-client-<n>`, `<vol>-replicate-<k>` or `<vol>-stripe-<k>`.
    pub name: String,
    /// Positions in [`VolumeSpec::bricks`].
    pub bricks: std::ops::Range<usize>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where the bricks listen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// Address the bricks bind; default: 127.0.0.1 for local bricks, the host as written for
    /// `host:/path` (never every address unless asked: `0.0.0.0`).
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
            arbiter: 0,
            transport: Transport::default(),
            auth_allow: Vec::new(),
            secret: None,
            secret_file: None,
            options: BTreeMap::new(),
            brick_ids: Vec::new(),
            next_brick_id: 0,
        }
    }

    /// The id of the brick at position `pos` (names, port, state files).
    pub fn brick_id(&self, pos: usize) -> usize {
        match self.brick_ids.get(pos) {
            Some(id) => *id as usize,
            None => pos,
        }
    }

    /// The position of the brick with id `id`.
    pub fn position_of(&self, id: usize) -> Option<usize> {
        (0..self.bricks.len()).find(|p| self.brick_id(*p) == id)
    }

    /// The highest brick id, if there are bricks.
    fn max_id(&self) -> Option<usize> {
        self.bricks.len().checked_sub(1).map(|p| self.brick_id(p))
    }

    /// The id the next added brick gets.
    pub fn next_id(&self) -> usize {
        let after = self.max_id().map_or(0, |m| m + 1);
        after.max(self.next_brick_id as usize)
    }

    /// The children of the distribute layer, in order, with their bricks.
    pub fn subvolumes(&self) -> Vec<Subvolume> {
        let layout = self.layout();
        let set = layout.set_size().max(1);
        (0..self.bricks.len() / set)
            .map(|k| {
                let first = self.brick_id(k * set);
                let name = if self.stripe > 1 {
                    format!("{}-stripe-{}", self.name, first / set)
                } else if self.replica > 1 {
                    format!("{}-replicate-{}", self.name, first / self.replica as usize)
                } else {
                    format!("{}-client-{first}", self.name)
                };
                Subvolume {
                    name,
                    bricks: k * set..(k + 1) * set,
                }
            })
            .collect()
    }

    /// Appends `bricks` (whole distribute subvolumes) with fresh ids; [`VolumeSpec::check`]
    /// says whether the result is a valid volume.
    pub fn add_bricks(&mut self, bricks: Vec<Brick>) {
        let next = self.next_id();
        if !self.brick_ids.is_empty() || next != self.bricks.len() {
            self.brick_ids = (0..self.bricks.len())
                .map(|p| self.brick_id(p) as u32)
                .collect();
            let n = bricks.len();
            self.brick_ids.extend((next..next + n).map(|id| id as u32));
        }
        self.bricks.extend(bricks);
    }

    /// Removes the bricks at `positions`; the others keep their ids, and removed ids are
    /// not given out again.
    pub fn remove_bricks(&mut self, positions: &[usize]) {
        let next = self.next_id() as u32;
        let keep: Vec<usize> = (0..self.bricks.len())
            .filter(|p| !positions.contains(p))
            .collect();
        self.brick_ids = keep.iter().map(|p| self.brick_id(*p) as u32).collect();
        self.bricks = keep.iter().map(|p| self.bricks[*p].clone()).collect();
        self.next_brick_id = next;
        // Back to the plain numbering when nothing was renumbered.
        if self
            .brick_ids
            .iter()
            .enumerate()
            .all(|(p, id)| p == *id as usize)
        {
            self.brick_ids.clear();
            if self.next_brick_id as usize == self.bricks.len() {
                self.next_brick_id = 0;
            }
        }
    }

    /// The shape of the volume.
    pub fn layout(&self) -> Layout {
        Layout {
            bricks: self.bricks.len(),
            replica: self.replica,
            stripe: self.stripe,
            arbiter: self.arbiter,
        }
    }

    /// Whether the brick at position `pos` is an arbiter (the last of its replica set).
    pub fn is_arbiter(&self, pos: usize) -> bool {
        self.arbiter > 0
            && self.replica > 1
            && self.brick_id(pos) % self.replica as usize == self.replica as usize - 1
    }

    /// The port of the brick at position `pos`: base port + its id (saturating;
    /// [`VolumeSpec::check`] rejects overflow).
    pub fn brick_port(&self, pos: usize) -> u16 {
        let port = usize::from(self.transport.base_port).saturating_add(self.brick_id(pos));
        u16::try_from(port).unwrap_or(u16::MAX)
    }

    /// The range of ports the volume's bricks use (ids of removed bricks included).
    pub fn ports(&self) -> std::ops::RangeInclusive<u32> {
        let base = u32::from(self.transport.base_port);
        base..=base + self.max_id().unwrap_or(0) as u32
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
    /// Arbiter bricks per replica set (0 or 1).
    pub arbiter: u32,
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
        if self.replica > 1 && self.arbiter > 0 {
            parts.push(format!("replica {} arbiter {}", self.replica, self.arbiter));
        } else if self.replica > 1 {
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
                arbiter: 0,
            }
            .to_string()
        };
        assert_eq!(l(1, 1, 1), "plain");
        assert_eq!(l(3, 1, 1), "distribute 3");
        assert_eq!(l(2, 2, 1), "replica 2");
        assert_eq!(l(4, 2, 1), "distribute 2 x replica 2");
        assert_eq!(l(8, 2, 2), "distribute 2 x stripe 2 x replica 2");
        let arb = Layout {
            bricks: 6,
            replica: 3,
            stripe: 1,
            arbiter: 1,
        };
        assert_eq!(arb.to_string(), "distribute 2 x replica 3 arbiter 1");
    }

    impl VolumeSpec {
        fn renamed(mut self, name: &str) -> VolumeSpec {
            self.name = name.into();
            self
        }
    }
}
