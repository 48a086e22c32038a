//! The translator: every fop is generated from the fop table, timed and counted around the
//! call to the child.

use std::sync::Arc;

use xlator_api::{Ctx, Errno, Fop, HostServices, Init, Subvol, Translator};

use crate::meter::{Meter, TYPE};
use crate::options::IoStatsOptions;
use crate::periodic;
use crate::stats::{Io, StatsSnapshot};

/// debug/io-stats.
pub struct IoStats {
    children: [Subvol; 1],
    meter: Arc<Meter>,
    services: HostServices,
}

impl IoStats {
    /// A copy of the counters (for in-process users; hosts use `dump`).
    pub fn snapshot(&self) -> StatsSnapshot {
        self.meter.snapshot()
    }
}

/// What a successful reply moved: only `readv` and `writev` carry data.
macro_rules! io_of {
    (readv, $reply:expr) => {
        Io::Read($reply.data.len() as u64)
    };
    (writev, $reply:expr) => {
        Io::Written($reply.written)
    };
    ($other:ident, $reply:expr) => {{
        let _ = $reply;
        Io::None
    }};
}

/// One measured override per fop in the table.
macro_rules! measured_fops {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                let start = self.meter.start();
                let r = self.children[0].$name(cx $(, $arg)*).await;
                let outcome = match &r {
                    Ok(reply) => Ok(io_of!($name, reply)),
                    Err(e) => Err(*e),
                };
                self.meter.finish(Fop::$Variant, start, outcome);
                r
            }
        )*
    };
}

impl Translator for IoStats {
    const TYPE: &'static str = TYPE;
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Counts calls, errors (per errno), bytes read/written and a \
        latency histogram for every fop passing through; dumps them as a text table or JSON.";

    type Options = IoStatsOptions;

    fn init(init: Init<IoStatsOptions>) -> Result<Self, String> {
        let name = init.name;
        let children = xlator_api::one_child(TYPE, &name, init.children)?;
        let meter = Arc::new(Meter::new(name, &init.options)?);
        periodic::ensure_running(&meter, init.services);
        Ok(IoStats {
            children,
            meter,
            services: init.services,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }

    fn reconfigure(&self, options: IoStatsOptions) -> Result<(), String> {
        self.meter.apply(&options)?;
        periodic::ensure_running(&self.meter, self.services);
        Ok(())
    }

    fn dump(&self) -> xlator_api::Dump {
        self.meter.dump_value()
    }

    xlator_api::for_each_fop!(measured_fops);
}
