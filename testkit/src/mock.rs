//! A mock child translator, in the spirit of `tower-test`: put it under the translator you test,
//! script its replies, then assert exactly which fops reached it, in which order, with which
//! arguments.
//!
//! [`FopCall`], [`FopReply`] and the mock's fop methods are generated from the fop table
//! ([`xlator_api::for_each_fop!`]), so a new fop needs no edit here.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use xlator_api::{Ctx, Errno, Fop, Gfid};
//! use xlfs_testkit::mock::{FopReply, MockChild};
//!
//! let (child, handle) = MockChild::new();
//! handle.fail(Fop::Stat, Errno::EIO);
//! assert_eq!(child.stat(&Ctx::root(), Gfid::ROOT).await, Err(Errno::EIO));
//! // Unscripted calls answer ENOSYS.
//! assert_eq!(child.statfs(&Ctx::root(), Gfid::ROOT).await, Err(Errno::ENOSYS));
//! handle.assert_calls(&[Fop::Stat, Fop::Statfs]);
//! # }
//! ```

mod cluster;
mod handle;
mod script;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use xlator_api::{Ctx, Errno, Fop, HostServices, Init, InitArgs, Options, Subvol, Translator};

pub use cluster::MockCluster;
pub use handle::{MockHandle, RecordedCall};
use script::MockState;

macro_rules! gen_mock {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// One fop call as it reached the mock: the fop and its arguments. The caller's
        /// [`Ctx`] is kept next to it in [`RecordedCall`] (`Ctx` has no equality).
        #[derive(Debug, Clone, PartialEq)]
        pub enum FopCall {
            $(
                $(#[doc = $doc])*
                $Variant { $( #[allow(missing_docs)] $arg: $ty ),* },
            )*
        }

        impl FopCall {
            /// Which fop this is.
            pub fn fop(&self) -> Fop {
                match self {
                    $( FopCall::$Variant { .. } => Fop::$Variant, )*
                }
            }

            /// One line naming the fop and its arguments: `lookup(loc=Loc { .. })`. Payloads
            /// show only their length (`Buf`'s `Debug`).
            pub fn summary(&self) -> String {
                match self {
                    $( FopCall::$Variant { $($arg),* } => {
                        let args: Vec<String> = vec![$(format!("{}={:?}", stringify!($arg), $arg)),*];
                        format!("{}({})", stringify!($name), args.join(", "))
                    } )*
                }
            }

            /// Sends this call to `to` and wraps its reply.
            pub async fn send(self, cx: &Ctx, to: &Subvol) -> FopReply {
                match self {
                    $( FopCall::$Variant { $($arg),* } => {
                        FopReply::$Variant(to.$name(cx $(, $arg)*).await)
                    } )*
                }
            }
        }

        /// A reply of one fop, as scripted for the mock or as returned by [`FopCall::send`].
        #[derive(Debug, Clone, PartialEq)]
        pub enum FopReply {
            $( $(#[doc = $doc])* $Variant(Result<$ret, Errno>), )*
        }

        impl FopReply {
            /// Which fop this reply answers.
            pub fn fop(&self) -> Fop {
                match self {
                    $( FopReply::$Variant(_) => Fop::$Variant, )*
                }
            }

            /// The failure reply `errno` for `fop`.
            pub fn error(fop: Fop, errno: Errno) -> FopReply {
                match fop {
                    $( Fop::$Variant => FopReply::$Variant(Err(errno)), )*
                }
            }

            /// The error of a failure reply, `None` for a success.
            pub fn errno(&self) -> Option<Errno> {
                match self {
                    $( FopReply::$Variant(r) => r.as_ref().err().copied(), )*
                }
            }
        }

        impl Translator for MockChild {
            const TYPE: &'static str = "testing/mock";
            const DOC: &'static str = "Records every fop and answers from scripted replies \
                (ENOSYS when unscripted); forwards unscripted fops to its child if it has one.";
            const MIN_CHILDREN: u32 = 0;
            const MAX_CHILDREN: u32 = 1;
            type Options = ();

            fn init(init: Init<()>) -> Result<Self, String> {
                Ok(MockChild {
                    state: state_for(&init.name),
                    services: init.services,
                    children: init.children,
                })
            }

            fn children(&self) -> &[Subvol] {
                &self.children
            }

            $(
                async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                    let call = FopCall::$Variant { $($arg),* };
                    let child = self.children.first();
                    match self.state.serve(&self.services, child, cx, call).await {
                        FopReply::$Variant(r) => r,
                        other => Err(self.state.mismatch(Fop::$Variant, &other)),
                    }
                }
            )*
        }
    };
}
xlator_api::for_each_fop!(gen_mock);

/// The mock translator (`testing/mock`, 0 or 1 children). Build one with [`MockChild::new`],
/// or from a volfile and then [`MockHandle::attach`] by instance name.
///
/// Each call is recorded on arrival, then answered by, in order of precedence: the next
/// scripted reply queued for its fop, the fop's handler closure, the child (if there is one),
/// or the default error (ENOSYS unless changed).
pub struct MockChild {
    state: Arc<MockState>,
    services: HostServices,
    children: Vec<Subvol>,
}

/// Scripts of mocks by instance name, so a handle and the instance `instantiate` builds find
/// each other (the constructor only sees `InitArgs`).
static REGISTRY: Mutex<Option<HashMap<String, Weak<MockState>>>> = Mutex::new(None);

/// Numbers anonymous mocks.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The script of instance `name`: the one a handle prepared, or a fresh one (registered so a
/// test can attach to a mock built from a volfile).
fn state_for(name: &str) -> Arc<MockState> {
    let mut reg = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let map = reg.get_or_insert_with(HashMap::new);
    if let Some(state) = map.get(name).and_then(Weak::upgrade) {
        return state;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let state = Arc::new(MockState::new(name));
    map.insert(name.to_owned(), Arc::downgrade(&state));
    state
}

fn registered(name: &str) -> Option<Arc<MockState>> {
    let reg = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    reg.as_ref()?.get(name).and_then(Weak::upgrade)
}

impl MockChild {
    /// A mock leaf (no children) with a unique instance name, and its handle.
    ///
    /// Uses [`xlfs_core::services::host_services`]: call it inside a tokio runtime.
    #[allow(clippy::new_ret_no_self)] // the translator lives behind the Subvol, as in a graph
    pub fn new() -> (Subvol, MockHandle) {
        let name = format!("mock-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
        Self::build(&name, Vec::new())
    }

    /// A recording pass-through over `inner`: unscripted fops are forwarded to it and its
    /// replies returned, so the handle shows what a translator sent to a real child.
    pub fn spy(inner: Subvol) -> (Subvol, MockHandle) {
        let name = format!("spy-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
        Self::build(&name, vec![inner])
    }

    fn build(name: &str, children: Vec<Subvol>) -> (Subvol, MockHandle) {
        Self::build_with(name, children, xlfs_core::services::host_services())
    }

    /// A mock named `name` over `children` with the given services (their event sink is
    /// where [`MockCluster`] raises the mock's ChildUp/ChildDown).
    pub(crate) fn build_with(
        name: &str,
        children: Vec<Subvol>,
        services: HostServices,
    ) -> (Subvol, MockHandle) {
        let state = state_for(name);
        let args = InitArgs {
            name: name.into(),
            options: Options::new(),
            children: children.into(),
            services,
        };
        match xlator_api::sdk::instantiate::<MockChild>(args) {
            Ok(subvol) => (subvol, MockHandle::from_state(state)),
            // `init` above cannot fail and `()` options always parse.
            Err(e) => unreachable!("mock init is infallible, got {e}"),
        }
    }
}
