//! A mounted/served volume: the current graph, replaced atomically. A fop takes the current
//! graph (`Arc`) for its whole life, so a switch never disturbs calls in flight; the old graph
//! drops when its last call ends. Option-only changes to reconfigurable options are applied in
//! place with `reconfigure`; anything else builds a new graph and switches to it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use xlator_api::EventKind;

use crate::graph::{Graph, GraphError, UpcallHook};
use crate::registry::Registry;
use crate::volfile::{self, Volfile};

/// What [`Volume::reload`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// Nothing differs.
    Unchanged,
    /// Options of these volumes were changed in place.
    Reconfigured(Vec<String>),
    /// A new graph was built and made current.
    Switched { old_graph: u64, new_graph: u64 },
}

pub struct Volume {
    registry: Arc<Registry>,
    current: ArcSwap<Graph>,
    /// Held for a whole [`Volume::reload`]: a SIGHUP, a control-socket reload and a volfile
    /// watch may ask at once, and each must compare against the graph the previous one left.
    reloading: std::sync::Mutex<()>,
    /// The host's upcall receiver, given to every graph this volume switches to.
    upcalls: std::sync::Mutex<Option<UpcallHook>>,
}

impl Volume {
    /// Builds the first graph.
    pub fn new(volfile: Volfile, registry: Arc<Registry>) -> Result<Volume, GraphError> {
        let graph = Graph::build(volfile, &registry)?;
        Ok(Volume {
            registry,
            current: ArcSwap::from_pointee(graph),
            reloading: std::sync::Mutex::new(()),
            upcalls: std::sync::Mutex::new(None),
        })
    }

    /// The current graph. Hold the `Arc` for the duration of a fop.
    pub fn graph(&self) -> Arc<Graph> {
        self.current.load_full()
    }

    /// Sends the upcalls that reach the top of the current graph, and of every graph this
    /// volume switches to, to `hook` ([`Graph::on_upcall`]).
    pub fn on_upcall(&self, hook: UpcallHook) {
        let mut held = self.upcalls.lock().unwrap_or_else(|p| p.into_inner());
        *held = Some(hook.clone());
        self.graph().on_upcall(Some(hook));
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Applies a new volfile: in place if only reconfigurable options changed, else by
    /// building a new graph and switching to it. On error the current graph stays.
    pub fn reload(&self, volfile: Volfile) -> Result<Reload, GraphError> {
        self.reload_when_ready(volfile, None)
    }

    /// [`Volume::reload`]; a new graph is switched to only once it is ready
    /// ([`Graph::wait_ready`], at most `ready`), so the first fops on it do not meet
    /// bricks still connecting (ENOTCONN). The current graph serves meanwhile. With `ready`,
    /// this blocks the calling thread: not from an async task (see `block_in_place`).
    pub fn reload_when_ready(
        &self,
        volfile: Volfile,
        ready: Option<std::time::Duration>,
    ) -> Result<Reload, GraphError> {
        // A panic in an earlier reload left nothing half-done here: the graph is swapped last.
        let _one_at_a_time = self
            .reloading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cur = self.graph();
        volfile::validate(&volfile, &*self.registry)?;
        if let Some(changes) = self.in_place_changes(&cur, &volfile)? {
            if changes.is_empty() {
                return Ok(Reload::Unchanged);
            }
            for (name, opts) in &changes {
                if let Some(node) = cur.node(name) {
                    node.reconfigure(opts.clone())
                        .map_err(|reason| GraphError::Init {
                            origin: volfile.origin.clone(),
                            volume: name.clone(),
                            type_name: node.info.name.to_string(),
                            reason: format!("reconfigure failed: {reason}"),
                        })?;
                }
            }
            return Ok(Reload::Reconfigured(
                changes.into_iter().map(|(n, _)| n).collect(),
            ));
        }
        let new = Graph::build(volfile, &self.registry)?;
        let hook = self
            .upcalls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        new.on_upcall(hook);
        if let Some(limit) = ready {
            let silent = new.wait_ready(limit);
            if !silent.is_empty() {
                tracing::warn!(
                    "the new graph switched to with {} not heard from after {limit:?}",
                    silent.join(", ")
                );
            }
        }
        let (old_graph, new_graph) = (cur.id(), new.id());
        self.current.store(Arc::new(new));
        cur.broadcast(EventKind::GraphSwitch);
        tracing::info!(old_graph, new_graph, "switched to a new graph");
        Ok(Reload::Switched {
            old_graph,
            new_graph,
        })
    }

    /// `Some(changed volumes with their new effective options)` when `new` has the same
    /// topology as `cur` and every changed option is reconfigurable; `None` otherwise.
    #[allow(clippy::type_complexity)]
    fn in_place_changes(
        &self,
        cur: &Graph,
        new: &Volfile,
    ) -> Result<Option<Vec<(String, xlator_api::Options)>>, GraphError> {
        let old = cur.volfile();
        if old.top_name() != new.top_name() {
            return Ok(None);
        }
        let old_order: Vec<_> = old.build_order().iter().map(|d| d.name.clone()).collect();
        let new_order: Vec<_> = new.build_order().iter().map(|d| d.name.clone()).collect();
        if old_order != new_order {
            return Ok(None);
        }
        let mut changes = Vec::new();
        for decl in new.build_order() {
            let Some(node) = cur.node(&decl.name) else {
                return Ok(None);
            };
            let old_decl = old.get(&decl.name);
            if old_decl.map(|d| (&d.type_name, &d.subvolumes))
                != Some((&decl.type_name, &decl.subvolumes))
            {
                return Ok(None);
            }
            let opts = volfile::effective_options(decl, &node.info, &new.origin)?;
            let cur_opts = node.options();
            if opts == cur_opts {
                continue;
            }
            for spec in node.info.options.iter() {
                if opts.get(&spec.key) != cur_opts.get(&spec.key) && !spec.reconfigurable {
                    return Ok(None);
                }
            }
            changes.push((decl.name.clone(), opts));
        }
        Ok(Some(changes))
    }
}
