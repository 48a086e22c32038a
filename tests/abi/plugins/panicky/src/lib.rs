//! Translators that panic, for the ABI tests: in init, in a fop's future, in a fop's
//! synchronous part, and in a spawned background task.

use std::future::Future;

use xlator_api::{Ctx, Entry, Errno, Gfid, Iatt, Init, Loc, Subvol, Translator};

/// `test/panic-init`: its constructor panics.
pub struct PanicInit;

impl Translator for PanicInit {
    const TYPE: &'static str = "test/panic-init";
    const MIN_CHILDREN: u32 = 0;
    type Options = ();
    fn init(_: Init<()>) -> Result<Self, String> {
        panic!("panic-init: constructor exploded on purpose")
    }
    fn children(&self) -> &[Subvol] {
        &[]
    }
}

/// `test/panic-fop`: `lookup` panics while polled, `stat` panics before returning its
/// future, `access` panics in a spawned task and then answers; everything else passes down.
pub struct PanicFop {
    children: Vec<Subvol>,
    services: xlator_api::HostServices,
}

impl Translator for PanicFop {
    const TYPE: &'static str = "test/panic-fop";
    const MIN_CHILDREN: u32 = 0;
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(PanicFop {
            children: init.children,
            services: init.services,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn lookup(&self, _cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        if loc.name.as_str() == "boom" {
            panic!("panic-fop: lookup of boom");
        }
        Err(Errno::ENOENT)
    }
    #[allow(clippy::manual_async_fn, unreachable_code)]
    fn stat(&self, _cx: &Ctx, _gfid: Gfid) -> impl Future<Output = Result<Iatt, Errno>> + Send {
        panic!("panic-fop: stat panicked in its synchronous part");
        async { Err(Errno::EIO) }
    }
    async fn access(&self, _cx: &Ctx, _gfid: Gfid, _mask: u32) -> Result<(), Errno> {
        self.services
            .spawn(async { panic!("panic-fop: background task") });
        Ok(())
    }
}

xlator_api::export_translators!(PanicInit, PanicFop);
