//! Periodic dumps to a file, on a task spawned through [`HostServices`] (a cdylib's own tokio
//! has no reactor). The task holds only a `Weak` reference, so it ends at its next wake-up
//! once the translator is gone.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use xlator_api::HostServices;

use crate::meter::Meter;

/// Starts the dump task if periodic dumps are configured and no task is running.
pub fn ensure_running(meter: &Arc<Meter>, services: HostServices) {
    if meter.periodic().target().is_none() || meter.dumper_running.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(meter);
    services.spawn(run(weak, services));
}

async fn run(weak: Weak<Meter>, services: HostServices) {
    let mut failing = false;
    loop {
        let Some(interval) = weak.upgrade().and_then(|m| keep_running(&m)) else {
            return;
        };
        services.sleep(interval).await;
        let Some(m) = weak.upgrade() else { return };
        // Re-read: a reconfigure may have changed the file or format during the sleep.
        let cfg = m.periodic();
        let Some(path) = cfg.target().cloned() else {
            continue;
        };
        let text = m.dump(cfg.format);
        drop(m);
        let shown = path.display().to_string();
        let r = services
            .spawn_blocking(move || write_replacing(&path, text.as_bytes()))
            .await;
        match r {
            Ok(Ok(())) => failing = false,
            // Warn once per run of failures, not every interval.
            Ok(Err(e)) if !failing => {
                failing = true;
                tracing::warn!(target: "xlfs::io-stats", "cannot write dump to {shown}: {e}");
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(target: "xlfs::io-stats", "dump to {shown} not written: {e:?}");
            }
            _ => {}
        }
    }
}

/// The next sleep, or `None` when dumps were turned off and this task should end.
fn keep_running(m: &Meter) -> Option<std::time::Duration> {
    if let Some(interval) = enabled_interval(m) {
        return Some(interval);
    }
    m.dumper_running.store(false, Ordering::Release);
    // A reconfigure may have re-enabled dumps after the check above but seen the task still
    // running and not started another one: take the slot back in that case.
    let interval = enabled_interval(m)?;
    if m.dumper_running.swap(true, Ordering::AcqRel) {
        None // a new task already owns it
    } else {
        Some(interval)
    }
}

fn enabled_interval(m: &Meter) -> Option<std::time::Duration> {
    let cfg = m.periodic();
    cfg.target().map(|_| cfg.interval)
}

/// Writes `bytes` to `<path>.tmp` and renames it over `path`, so readers never see a
/// half-written dump.
fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.flush()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_replacing_replaces_whole_file() {
        let dir = std::env::temp_dir().join(format!("xlfs-io-stats-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let p = dir.join("dump.json");
        write_replacing(&p, b"a much longer first version").expect("write 1");
        write_replacing(&p, b"v2").expect("write 2");
        assert_eq!(std::fs::read(&p).expect("read"), b"v2");
        assert!(!dir.join("dump.json.tmp").exists());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
