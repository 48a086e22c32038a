//! The statedump: children up or down, eager holds, heals, split-brain objects.

use std::sync::atomic::Ordering;

use xlator_api::{Dump, DumpValue};

use crate::shared::{Shared, lock};

fn list(v: impl IntoIterator<Item = String>) -> DumpValue {
    DumpValue::List(v.into_iter().map(|s| DumpValue::Str(s.into())).collect())
}

pub(crate) fn dump(sh: &Shared) -> Dump {
    let mut children = Dump::new();
    for (i, c) in sh.children.iter().enumerate() {
        let state = if sh.up.is_up(i) { "up" } else { "down" };
        children.push(c.name(), state);
    }
    let held = sh.eager.held();
    let cfg = sh.cfg();
    Dump::new()
        .with("children", children)
        .with("up", sh.up.up_count())
        .with("quorum", format!("{:?}", cfg.quorum))
        .with("read-policy", format!("{:?}", cfg.read_policy))
        .with("eager-locks-held", held.len())
        .with(xlator_api::PENDING_AT_EXIT, held.len())
        .with(
            "eager-locked-files",
            list(held.iter().take(64).map(ToString::to_string)),
        )
        .with("open-fds", sh.fds.len())
        .with("heals-running", sh.heals.running())
        .with("heals-done", sh.heals.done.load(Ordering::Relaxed))
        .with("heals-failed", sh.heals.failed.load(Ordering::Relaxed))
        .with("heals-skipped", sh.heals.skipped.load(Ordering::Relaxed))
        .with("split-brain", list(lock(&sh.split_brains).iter().cloned()))
}
