//! VolumeSpec -> one server volfile per brick and the client volfile.
//!
//! Server (bottom to top): `<vol>-posix` storage/posix -> [`<vol>-arbiter` features/arbiter,
//! on the arbiter bricks of `replica 3 arbiter 1`] -> `<vol>-locks` features/locks ->
//! [`<vol>-read-only`] -> `<vol>-brick-<i>` debug/io-stats (the subvolume clients attach to)
//! -> `<vol>-server` protocol/server.
//!
//! Client: `<vol>-client-<i>` protocol/client per brick -> `<vol>-replicate-<k>` per replica
//! set -> `<vol>-stripe-<k>` per stripe -> `<vol>-dht` over the stripes -> the performance
//! translators the build has -> `<vol>` debug/io-stats on top (named after the volume, as in
//! GlusterFS, so mounts and dumps show it).
//!
//! `i` is the brick's id ([`VolumeSpec::brick_id`]), `k` its id divided by the bricks per
//! replica set (per stripe): names stay the same when bricks are added after the others or
//! whole subvolumes removed, which link files and pending counters rely on.

use xlfs_core::volfile::{OptionDecl, Pos, TypeLookup, Volfile, VolumeDecl, validate};

use crate::brick::Brick;
use crate::error::VolgenError;
use crate::keys::{Catalog, Overrides};
use crate::spec::VolumeSpec;
use crate::stack::{Role, Side, Slot, slot, slots_of};

/// The generated volfiles of a volume.
#[derive(Clone, Debug)]
pub struct Generated {
    /// One per brick, in brick order.
    pub servers: Vec<ServerVolfile>,
    pub client: Volfile,
}

/// The server volfile of one brick.
#[derive(Clone, Debug)]
pub struct ServerVolfile {
    /// The brick's id (its position when no brick was removed).
    pub index: usize,
    pub brick: Brick,
    pub port: u16,
    pub volfile: Volfile,
}

/// The name of the subvolume brick id `index` exports (the client's `remote-subvolume`).
pub fn brick_volume_name(volume: &str, index: usize) -> String {
    format!("{volume}-brick-{index}")
}

/// Checks `spec` and generates its volfiles with the translators `types` has; every
/// volfile is validated against `types` before it is returned.
pub fn generate(spec: &VolumeSpec, types: &dyn TypeLookup) -> Result<Generated, VolgenError> {
    spec.check()?;
    let catalog = Catalog::new(types);
    let overrides = catalog.overrides(spec)?;
    let g = Gen {
        spec,
        catalog: &catalog,
        overrides: &overrides,
    };
    let servers = (0..spec.bricks.len())
        .map(|i| g.server(i))
        .collect::<Result<Vec<_>, _>>()?;
    let client = g.client()?;
    for s in &servers {
        let which = format!("server volfile of brick {} ({})", s.index, s.brick);
        validate(&s.volfile, types).map_err(|e| VolgenError::Generated {
            which,
            source: Box::new(e),
        })?;
    }
    validate(&client, types).map_err(|e| VolgenError::Generated {
        which: "client volfile".into(),
        source: Box::new(e),
    })?;
    Ok(Generated { servers, client })
}

struct Gen<'a> {
    spec: &'a VolumeSpec,
    catalog: &'a Catalog,
    overrides: &'a Overrides,
}

/// A volfile under construction.
#[derive(Default)]
struct Stack {
    volumes: Vec<VolumeDecl>,
}

impl Stack {
    fn push(
        &mut self,
        name: String,
        type_name: &str,
        options: Vec<(&str, String)>,
        subs: Vec<String>,
    ) {
        let options = options
            .into_iter()
            .map(|(k, v)| OptionDecl {
                key: k.into(),
                value: v,
                pos: Pos::default(),
            })
            .collect();
        self.volumes.push(VolumeDecl {
            name,
            type_name: type_name.into(),
            options,
            subvolumes: subs,
            pos: Pos::default(),
        });
    }

    fn top(&self) -> String {
        self.volumes
            .last()
            .map(|v| v.name.clone())
            .unwrap_or_default()
    }

    fn into_volfile(self, origin: String) -> Volfile {
        Volfile {
            origin,
            volumes: self.volumes,
            top: None,
        }
    }
}

impl Gen<'_> {
    fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.spec.name)
    }

    /// The slot's options: generated ones, then the volume's overrides (which replace a
    /// generated value of the same key).
    fn options(&self, slot: &Slot, generated: Vec<(&'static str, String)>) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> = generated;
        for (key, value) in self.overrides.get(slot.key).into_iter().flatten() {
            if key.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(k, _)| k == key) {
                Some(kv) => kv.1 = value.clone(),
                None => out.push((key.as_str(), value.clone())),
            }
        }
        out
    }

    /// Whether the optional `slot` goes in: its type is known and it is not switched off.
    fn wanted(&self, slot: &Slot) -> bool {
        let Role::Optional { default_on } = slot.role else {
            return true;
        };
        let switch = self
            .overrides
            .get(slot.key)
            .and_then(|o| o.iter().find(|(k, _)| k.is_empty()))
            .map(|(_, v)| xlator_api::parse_bool(v).unwrap_or(default_on));
        self.catalog.has(slot) && switch.unwrap_or(default_on)
    }

    fn required(&self, key: &str, what: &str) -> Result<(&'static Slot, String), VolgenError> {
        let s = slot(key).ok_or_else(|| VolgenError::Unavailable {
            what: what.into(),
            type_name: key.into(),
            detail: "volgen has no such slot".into(),
        })?;
        Ok((s, self.catalog.type_for(s, what)?.to_owned()))
    }

    fn server(&self, pos: usize) -> Result<ServerVolfile, VolgenError> {
        let spec = self.spec;
        let brick = spec.bricks[pos].clone();
        let port = spec.brick_port(pos);
        let index = spec.brick_id(pos);
        let what = "a brick";
        let mut st = Stack::default();
        // protocol/server goes on top; io-stats (last in the table) right below it.
        let (top, rest): (Vec<&Slot>, Vec<&Slot>) =
            slots_of(Side::Server).partition(|s| s.key == "protocol.server");
        for slot in rest.into_iter().chain(top) {
            if !self.wanted(slot) || (slot.key == "features.arbiter" && !spec.is_arbiter(pos)) {
                continue;
            }
            let type_name = self.catalog.type_for(slot, what)?;
            let below: Vec<String> = if st.volumes.is_empty() {
                vec![]
            } else {
                vec![st.top()]
            };
            let (name, generated) = match slot.key {
                "storage.posix" => (self.name("posix"), vec![("directory", brick.path().into())]),
                "debug.io-stats" => (brick_volume_name(&spec.name, index), vec![]),
                "protocol.server" => (self.name("server"), self.server_transport(&brick, port)),
                key => (self.name(key.rsplit('.').next().unwrap_or(key)), vec![]),
            };
            let options = self.options(slot, generated);
            st.push(name, type_name, options, below);
        }
        let origin = format!("{} server volfile of brick {index} ({brick})", spec.name);
        Ok(ServerVolfile {
            index,
            brick,
            port,
            volfile: st.into_volfile(origin),
        })
    }

    fn server_transport(&self, brick: &Brick, port: u16) -> Vec<(&'static str, String)> {
        let spec = self.spec;
        // A brick listens only where it was named (its host's address, or loopback), never
        // on every address unless `--listen-host 0.0.0.0` asks for it.
        let host = match (&spec.transport.listen_host, brick.host()) {
            (Some(h), _) => h.clone(),
            (None, None) => crate::brick::LOOPBACK.into(),
            (None, Some(h)) => h.to_owned(),
        };
        let mut out = vec![("listen-host", host), ("listen-port", port.to_string())];
        if !spec.auth_allow.is_empty() {
            out.push(("auth-allow", spec.auth_allow.join(",")));
        }
        out.extend(self.secret_options());
        out
    }

    /// How protocol/server and protocol/client get the volume's secret: the file's path, or
    /// (volumes made before secret files) the secret itself.
    fn secret_options(&self) -> Option<(&'static str, String)> {
        let spec = self.spec;
        match (&spec.secret_file, &spec.secret) {
            (Some(file), _) => Some(("secret-file", file.to_string_lossy().into_owned())),
            (None, Some(secret)) => Some(("secret", secret.clone())),
            (None, None) => None,
        }
    }

    fn client(&self) -> Result<Volfile, VolgenError> {
        let spec = self.spec;
        let layout = spec.layout();
        let mut st = Stack::default();

        let (client, client_type) = self.required("protocol.client", "a client graph")?;
        // (name, id of its first brick)
        let mut level: Vec<(String, usize)> = Vec::new();
        for (pos, brick) in spec.bricks.iter().enumerate() {
            let i = spec.brick_id(pos);
            let mut generated = vec![
                ("remote-host", brick.connect_host().to_owned()),
                ("remote-port", spec.brick_port(pos).to_string()),
                ("remote-subvolume", brick_volume_name(&spec.name, i)),
            ];
            generated.extend(self.secret_options());
            let name = self.name(&format!("client-{i}"));
            st.push(
                name.clone(),
                &client_type,
                self.options(client, generated),
                vec![],
            );
            level.push((name, i));
        }

        // Cluster layers, innermost first: replica sets, stripes, distribute.
        let layers = [
            (
                "cluster.replicate",
                "replicate",
                "replica",
                layout.replica as usize,
            ),
            ("cluster.stripe", "stripe", "stripe", layout.stripe as usize),
            ("cluster.distribute", "dht", "", layout.distribute()),
        ];
        // Bricks under each translator of `level`.
        let mut span = 1;
        for (key, suffix, word, width) in layers {
            if width <= 1 {
                continue;
            }
            let what = match suffix {
                "dht" => format!("a volume of {} bricks ({layout})", layout.bricks),
                _ => format!("{word} {width}"),
            };
            let (slot, type_name) = self.required(key, &what)?;
            let groups: Vec<Vec<(String, usize)>> = level
                .chunks(width)
                .map(<[(String, usize)]>::to_vec)
                .collect();
            span *= width;
            level = Vec::new();
            for children in groups {
                let first = children.first().map_or(0, |c| c.1);
                // Replica sets and stripes are numbered even when there is one (GlusterFS
                // names them so, and replication keeps per-set metadata under the name).
                let name = match suffix {
                    "dht" => self.name(suffix),
                    _ => self.name(&format!("{suffix}-{}", first / span)),
                };
                let generated = if suffix == "replicate" && spec.arbiter > 0 {
                    vec![("arbiter-count", spec.arbiter.to_string())]
                } else {
                    vec![]
                };
                st.push(
                    name.clone(),
                    &type_name,
                    self.options(slot, generated),
                    children.into_iter().map(|c| c.0).collect(),
                );
                level.push((name, first));
            }
        }

        for slot in slots_of(Side::Client).filter(|s| s.is_optional() || s.key == "debug.io-stats")
        {
            if !self.wanted(slot) {
                continue;
            }
            let type_name = self.catalog.type_for(slot, "a client graph")?;
            let name = match slot.key {
                "debug.io-stats" => spec.name.clone(),
                key => self.name(key.rsplit('.').next().unwrap_or(key)),
            };
            st.push(name, type_name, self.options(slot, vec![]), vec![st.top()]);
        }
        crate::user::place(spec, &mut st.volumes)?;
        Ok(st.into_volfile(format!("{} client volfile", spec.name)))
    }
}
