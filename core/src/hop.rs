//! Per-hop fop spans: when `xlfs::fop` tracing is enabled at TRACE level while a graph is
//! built, each translator is wrapped so that every fop through it runs inside a span naming
//! the translator and the fop. When it is off, graphs are built without wrappers and cost
//! nothing.
//!
//! Also the layer that keeps backing files ([`xlator_api::Opened::backing`]) from passing
//! through a translator that does not declare `KEEPS_FILE_DATA` ([`drop_backing`]).

use tracing::Instrument as _;
#[allow(unused_imports)]
use xlator_api::*;
use xlator_api::{Ctx, Errno, Init, InitArgs, Subvol, Translator};

/// Whether spans per hop are wanted now.
pub fn enabled() -> bool {
    tracing::enabled!(target: "xlfs::fop", tracing::Level::TRACE)
}

/// Wraps `inner` in a span-emitting pass-through with the same name.
pub fn wrap(inner: Subvol) -> Subvol {
    wrap_in::<Hop>(inner)
}

/// `inner` under a `T` with the same name and no options (`inner` itself if `T` fails).
fn wrap_in<T: Translator<Options = ()>>(inner: Subvol) -> Subvol {
    let name = inner.name().to_owned();
    let args = InitArgs {
        name: name.as_str().into(),
        options: xlator_api::Options::new(),
        children: vec![inner.clone()].into(),
        services: crate::services::host_services(),
    };
    xlator_api::sdk::instantiate::<T>(args).unwrap_or(inner)
}

/// The wrapper translator.
pub struct Hop {
    name: String,
    children: Vec<Subvol>,
}

macro_rules! gen_hop {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        impl Translator for Hop {
            const TYPE: &'static str = "core/hop";
            type Options = ();
            fn init(init: Init<()>) -> Result<Self, String> {
                Ok(Hop { name: init.name, children: init.children })
            }
            fn children(&self) -> &[Subvol] {
                &self.children
            }
            fn notify(&self, event: xlator_api::Event) {
                self.children[0].notify(event)
            }
            fn upcall(&self, child: usize, up: &xlator_api::Upcall) -> bool {
                self.children[0].upcall(child as u32, up);
                false
            }
            $(
                async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                    let span = tracing::trace_span!(target: "xlfs::fop", "fop",
                        xl = %self.name, fop = stringify!($name), req = cx.request_id());
                    let r = self.children[0].$name(cx $(, $arg)*).instrument(span.clone()).await;
                    if let Err(e) = &r {
                        span.in_scope(|| tracing::trace!(target: "xlfs::fop", error = ?e, "failed"));
                    }
                    r
                }
            )*
        }
    };
}
xlator_api::for_each_fop!(gen_hop);

/// Wraps `inner` so that its open replies never carry a backing file: the graph engine puts
/// this around every translator that does not declare `Translator::KEEPS_FILE_DATA`, so a
/// caller never reads around a translator that may change file data on its way.
pub fn drop_backing(inner: Subvol) -> Subvol {
    wrap_in::<DropBacking>(inner)
}

/// The wrapper of [`drop_backing`]: every fop but `open` passes through untouched.
pub struct DropBacking {
    children: Vec<Subvol>,
}

impl Translator for DropBacking {
    const TYPE: &'static str = "core/drop-backing";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(DropBacking {
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn notify(&self, event: xlator_api::Event) {
        self.children[0].notify(event)
    }
    fn upcall(&self, child: usize, up: &xlator_api::Upcall) -> bool {
        self.children[0].upcall(child as u32, up);
        false
    }
    async fn open(&self, cx: &Ctx, fd: Fd) -> Result<Opened, Errno> {
        let mut opened = self.children[0].open(cx, fd).await?;
        opened.backing = xlator_api::abi_stable::std_types::ROption::RNone;
        Ok(opened)
    }
}
