//! The SDK: write a translator as plain `async fn`s for the fops it changes, plus one
//! [`export_translators!`](crate::export_translators) line. Everything else passes through to
//! the first child. Panics inside fops become EIO; panics in constructors become init errors.

use std::any::Any;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use abi_stable::std_types::{RResult, RStr, RString, RVec};
use async_ffi::FutureExt as _;
use futures::FutureExt as _;

use crate::abi::{Event, FfiFop, InitArgs, Subvol, TypeInfo, XlatorVTable};
#[allow(unused_imports)]
use crate::buf::Buf;
use crate::ctx::Ctx;
use crate::dump::Dump;
use crate::fops::Fop;
use crate::options::{Options, XlatorOptions};
use crate::services::{HostServices, LogLevel, LogSink};
use crate::types::Errno;
#[allow(unused_imports)] // used by the generated trait
use crate::types::*;

/// What a translator's constructor receives.
pub struct Init<O> {
    /// Instance name from the volfile.
    pub name: String,
    /// Typed options.
    pub options: O,
    /// Children in volfile order, already initialised.
    pub children: Vec<Subvol>,
    /// Spawn, sleep, blocking pool, clock, logging, fd ids.
    pub services: HostServices,
    /// Which children are up, exactly as the events delivered to [`Translator::notify`] say
    /// (updated before each `notify` call).
    pub child_state: ChildState,
}

/// The child of a translator that takes exactly one (what `init` of a performance or
/// debug translator starts with); the error names the instance and how many it got.
pub fn one_child(
    type_name: &str,
    name: &str,
    children: Vec<Subvol>,
) -> Result<[Subvol; 1], String> {
    children.try_into().map_err(|c: Vec<Subvol>| {
        format!(
            "{type_name} {name:?} needs exactly one subvolume, got {}",
            c.len()
        )
    })
}

/// Which of a translator's children are up: every child starts down; the SDK applies each
/// `ChildUp`/`ChildDown` event before passing it to [`Translator::notify`], so a translator
/// reading this in `notify` or in a fop sees the state those events describe. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ChildState(Arc<[std::sync::atomic::AtomicBool]>);

impl ChildState {
    /// `n` children, all down.
    pub fn new(n: usize) -> ChildState {
        ChildState(
            (0..n)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
        )
    }
    /// Number of children.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether child `i` is up (false for an index out of range).
    pub fn is_up(&self, i: usize) -> bool {
        self.0
            .get(i)
            .is_some_and(|b| b.load(std::sync::atomic::Ordering::Acquire))
    }
    /// Indices of the children that are up, in order.
    pub fn up(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.is_up(i)).collect()
    }
    /// Number of children up.
    pub fn up_count(&self) -> usize {
        (0..self.len()).filter(|&i| self.is_up(i)).count()
    }
    /// Applies an event; returns whether it changed the child's state.
    pub fn apply(&self, event: Event) -> bool {
        let up = match event.kind {
            crate::abi::EventKind::ChildUp => true,
            crate::abi::EventKind::ChildDown => false,
            _ => return false,
        };
        match self.0.get(event.child as usize) {
            Some(b) => b.swap(up, std::sync::atomic::Ordering::AcqRel) != up,
            None => false,
        }
    }
}

/// One page of a listing, for a translator that leaves out some of its child's entries
/// (removed since the child listed them, moved elsewhere...). `page(offset)` reads the
/// child's page at `offset` and answers the entries kept, with where to read on from when it
/// kept none (the page's last `next_offset`; `None` when there is nothing to read on: the
/// child's listing ended, or nothing was left out). An empty answer ends the caller's
/// listing, so a page whose entries were all left out is followed by the next one.
pub async fn listing_page<F, Fut>(mut offset: u64, mut page: F) -> Result<RVec<DirEntry>, Errno>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<(Option<u64>, RVec<DirEntry>), Errno>>,
{
    loop {
        let (next, kept) = page(offset).await?;
        match next {
            Some(next) if kept.is_empty() => offset = next,
            _ => return Ok(kept),
        }
    }
}

/// Opens `fd` again on `child` (the same fd id and flags, without `O_CREAT`, `O_EXCL` and
/// `O_TRUNC`): for a cluster translator whose child came back after a disconnect and lost the
/// fds opened on it. `dir` picks `opendir`.
pub async fn reopen_fd(child: &Subvol, cx: &Ctx, fd: Fd, dir: bool) -> Result<(), Errno> {
    let again = Fd {
        flags: fd.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC),
        ..fd
    };
    if dir {
        child.opendir(cx, again).await
    } else {
        child.open(cx, again).await.map(|_| ())
    }
}

macro_rules! gen_translator_trait {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// A translator. Implement the fops you change; every other fop goes to
        /// [`Translator::children`]`[0]` unchanged (ENOSYS when there are no children).
        ///
        /// Fop methods must not do work before their future is first polled (clone what you
        /// need, then `async move`); an `async fn` in the impl does this for you.
        pub trait Translator: Send + Sync + Sized + 'static {
            /// `category/name`, as volfiles spell it.
            const TYPE: &'static str;
            /// One paragraph of documentation.
            const DOC: &'static str = "";
            /// Fewest children this translator accepts.
            const MIN_CHILDREN: u32 = 1;
            /// Most children (`u32::MAX`: unbounded).
            const MAX_CHILDREN: u32 = 1;
            /// Whether this translator raises its own `ChildUp` through
            /// [`HostServices::notify_parents`] (a network client, a cluster translator that
            /// needs quorum). Otherwise the core tells its parents it is up once it is built.
            const ANNOUNCES_CHILD_UP: bool = false;
            /// Whether this translator keeps file data as stored: what a read returns is what
            /// its child holds at that offset, and a write stores its bytes at its offset
            /// (caching, delaying, tracing and counting are fine; encrypting, compressing,
            /// striping, replicating and making data up are not). A cache must drop what it
            /// holds of a file when an open of it returns a backing file (the file may then be
            /// read and written around it), as performance/io-cache does. Only then may a backing file
            /// from below pass through it to its caller (see [`Opened::backing`](crate::Opened::backing)); for others
            /// the graph engine drops it. Off unless declared.
            const KEEPS_FILE_DATA: bool = false;

            /// The typed options (see [`options!`](crate::options)); `()` for none.
            type Options: XlatorOptions;

            /// Builds the instance. An `Err` refuses the graph with this message.
            fn init(init: Init<Self::Options>) -> Result<Self, String>;

            /// The children, for pass-through defaults.
            fn children(&self) -> &[Subvol];

            /// Applies changed reconfigurable options on a running graph.
            fn reconfigure(&self, _options: Self::Options) -> Result<(), String> {
                Ok(())
            }

            /// A graph event (child up/down, graph switch). Default: nothing.
            fn notify(&self, _event: Event) {}

            /// Child `child` says something changed on a brick ([`Upcall`](crate::Upcall)):
            /// drop what you cache of it. Return true (the default) to pass it on to your
            /// parents, and so to the host; false to stop it here. Called on the thread that
            /// received it (a connection's reader): do not block.
            fn upcall(&self, _child: usize, _up: &crate::Upcall) -> bool {
                true
            }

            /// Counters and state for statedumps (the core renders them as text or JSON).
            /// Default: empty.
            fn dump(&self) -> Dump {
                Dump::new()
            }

            $(
                $(#[doc = $doc])*
                fn $name(&self, cx: &Ctx $(, $arg: $ty)*)
                    -> impl Future<Output = Result<$ret, Errno>> + Send
                {
                    async move {
                        match self.children().first() {
                            Some(child) => child.$name(cx $(, $arg)*).await,
                            None => Err(Errno::ENOSYS),
                        }
                    }
                }
            )*
        }

        /// The vtable for translator type `T`; one static per type.
        pub struct VTableFor<T>(std::marker::PhantomData<T>);

        impl<T: Translator> VTableFor<T> {
            pub const VTABLE: XlatorVTable = XlatorVTable {
                xl_retain: retain::<T>,
                xl_release: release::<T>,
                xl_notify: notify::<T>,
                xl_upcall: upcall::<T>,
                xl_reconfigure: reconfigure::<T>,
                xl_dump: dump::<T>,
                $( $name: shims::$name::<T>, )*
            };
        }

        mod shims {
            #[allow(unused_imports)]
            use super::*;
            $(
                pub(super) unsafe extern "C" fn $name<T: Translator>(
                    this: *const c_void, cx: Ctx $(, $arg: $ty)*
                ) -> FfiFop<$ret> {
                    // SAFETY: `this` is a live `Arc<Instance<T>>` (vtable contract).
                    let inst = unsafe { clone_arc::<T>(this) };
                    async move {
                        // The user's method is called inside the guarded future, so a panic in
                        // its synchronous part is caught too.
                        let r = crate::panics::Guarded(
                            AssertUnwindSafe(async { inst.xl.$name(&cx $(, $arg)*).await })
                                .catch_unwind(),
                        )
                        .await;
                        finish_fop(&inst, Fop::$Variant, r)
                    }
                    .into_ffi()
                }
            )*
        }
    };
}
crate::for_each_fop!(gen_translator_trait);

/// A translator instance behind a [`Subvol`].
#[doc(hidden)]
pub struct Instance<T> {
    pub name: String,
    pub xl: T,
    pub child_state: ChildState,
    /// Where upcalls the translator passes on go.
    pub events: crate::EventSink,
}

/// # Safety
/// `this` must be a live pointer from `Arc::<Instance<T>>::into_raw`.
unsafe fn clone_arc<T>(this: *const c_void) -> Arc<Instance<T>> {
    let p = this.cast::<Instance<T>>();
    // SAFETY: per the function contract; we add the reference we then take.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// The reply of a guarded fop: its result, or EIO (logged with the translator's name and the
/// fop) if it panicked, in its synchronous part or while polling.
fn finish_fop<T: Translator, R>(
    inst: &Instance<T>,
    fop: Fop,
    r: std::thread::Result<Result<R, Errno>>,
) -> RResult<R, Errno> {
    match r {
        Ok(r) => RResult::from(r),
        Err(p) => {
            tracing::error!(
                target: "xlfs::panic",
                "translator {} ({}) panicked in {}: {}{}; replying EIO",
                inst.name, T::TYPE, fop.name(), panic_message(&p), place()
            );
            RResult::RErr(Errno::EIO)
        }
    }
}

/// ` at file:line:col` of the panic just caught on this thread, if the hook saw it.
fn place() -> String {
    crate::panics::take_place()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default()
}

/// The text of a panic payload.
pub fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

unsafe extern "C" fn retain<T: Translator>(this: *const c_void) {
    // SAFETY: vtable contract: `this` is a live Arc<Instance<T>>.
    unsafe { Arc::increment_strong_count(this.cast::<Instance<T>>()) }
}

unsafe extern "C" fn release<T: Translator>(this: *const c_void) {
    // Dropping the translator runs user code (fini); keep a panic from crossing the boundary.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: vtable contract: gives back one reference taken by new/retain.
        unsafe { Arc::decrement_strong_count(this.cast::<Instance<T>>()) }
    });
}

unsafe extern "C" fn notify<T: Translator>(this: *const c_void, event: Event) {
    // SAFETY: vtable contract.
    let inst = unsafe { clone_arc::<T>(this) };
    inst.child_state.apply(event);
    if let Err(p) = crate::panics::guarded(|| inst.xl.notify(event)) {
        tracing::error!(target: "xlfs::panic", "translator {} panicked in notify: {}{}",
            inst.name, panic_message(&p), place());
    }
}

unsafe extern "C" fn upcall<T: Translator>(this: *const c_void, child: u32, up: &crate::Upcall) {
    // SAFETY: vtable contract.
    let inst = unsafe { clone_arc::<T>(this) };
    match crate::panics::guarded(|| inst.xl.upcall(child as usize, up)) {
        Ok(true) => inst.events.upcall_parents(up),
        Ok(false) => {}
        Err(p) => {
            tracing::error!(target: "xlfs::panic", "translator {} panicked in upcall: {}{}",
                inst.name, panic_message(&p), place());
        }
    }
}

unsafe extern "C" fn reconfigure<T: Translator>(
    this: *const c_void,
    options: Options,
) -> RResult<(), RString> {
    // SAFETY: vtable contract.
    let inst = unsafe { clone_arc::<T>(this) };
    let r = crate::panics::guarded(|| {
        let typed = T::Options::from_options(&options)?;
        inst.xl.reconfigure(typed)
    });
    match r {
        Ok(r) => r.map_err(RString::from).into(),
        Err(p) => {
            RResult::RErr(format!("reconfigure panicked: {}{}", panic_message(&p), place()).into())
        }
    }
}

unsafe extern "C" fn dump<T: Translator>(this: *const c_void) -> Dump {
    // SAFETY: vtable contract.
    let inst = unsafe { clone_arc::<T>(this) };
    crate::panics::guarded(|| inst.xl.dump()).unwrap_or_else(|p| {
        Dump::new().with(
            "error",
            format!("dump panicked: {}{}", panic_message(&p), place()),
        )
    })
}

/// The [`TypeInfo`] of `T`.
pub fn type_info<T: Translator>() -> TypeInfo {
    TypeInfo {
        name: T::TYPE.into(),
        doc: T::DOC.into(),
        options: T::Options::schema().into_iter().collect(),
        min_children: T::MIN_CHILDREN,
        max_children: T::MAX_CHILDREN,
        announces_child_up: T::ANNOUNCES_CHILD_UP,
        keeps_file_data: T::KEEPS_FILE_DATA,
    }
}

/// Builds an instance of `T` behind a [`Subvol`], with the constructor under `catch_unwind`.
pub fn instantiate<T: Translator>(args: InitArgs) -> Result<Subvol, String> {
    let InitArgs {
        name,
        options,
        children,
        services,
    } = args;
    let children: Vec<Subvol> = children.into_iter().collect();
    let events = services.events;
    let child_state = ChildState::new(children.len());
    let state = child_state.clone();
    let built = crate::panics::guarded(|| {
        let options = T::Options::from_options(&options)?;
        T::init(Init {
            name: name.to_string(),
            options,
            children,
            services,
            child_state: state,
        })
    });
    let xl = match built {
        Ok(r) => r?,
        Err(p) => return Err(format!("init panicked: {}{}", panic_message(&p), place())),
    };
    let inst = Arc::new(Instance {
        name: name.to_string(),
        xl,
        child_state,
        events,
    });
    let vt: &'static XlatorVTable = vtable_of::<T>();
    // SAFETY: the raw pointer owns the Arc's reference; the vtable is T's.
    Ok(unsafe { Subvol::from_raw(Arc::into_raw(inst).cast(), vt, name, RString::from(T::TYPE)) })
}

/// A `'static` vtable for `T` (const-promoted: `VTABLE` is a constant of fn pointers).
fn vtable_of<T: Translator>() -> &'static XlatorVTable {
    struct Holder<T>(std::marker::PhantomData<T>);
    impl<T: Translator> Holder<T> {
        const REF: &'static XlatorVTable = &VTableFor::<T>::VTABLE;
    }
    Holder::<T>::REF
}

/// A constructor of one translator type, by name.
#[doc(hidden)]
pub type Ctor = (&'static str, fn(InitArgs) -> Result<Subvol, String>);

/// Constructor entry used by [`export_translators!`](crate::export_translators): dispatches by
/// type name over the listed types.
#[doc(hidden)]
pub fn new_by_name(
    type_name: RStr<'_>,
    args: InitArgs,
    ctors: &[Ctor],
) -> RResult<Subvol, RString> {
    match ctors.iter().find(|(n, _)| *n == type_name.as_str()) {
        Some((_, ctor)) => match crate::panics::guarded(|| ctor(args)) {
            Ok(r) => r.map_err(RString::from).into(),
            Err(p) => {
                RResult::RErr(format!("init panicked: {}{}", panic_message(&p), place()).into())
            }
        },
        None => RResult::RErr(format!("this library has no type {:?}", type_name.as_str()).into()),
    }
}

/// Installs, in this library's copy of `tracing`, a subscriber forwarding events to `log`.
#[doc(hidden)]
pub fn install_log_bridge(log: LogSink, max_level: LogLevel) {
    let _ = tracing::subscriber::set_global_default(crate::logbridge::Bridge {
        log: log.log_fn,
        max_level,
    });
    // This library's std has its own panic hook: make it log one line through the bridge.
    crate::panics::install_hook();
}

#[doc(hidden)]
pub fn types_of(infos: Vec<TypeInfo>) -> RVec<TypeInfo> {
    infos.into()
}

/// Exports translator types from a library: builds the root module (for loading the cdylib)
/// and registers it statically (for linking the rlib). Call it once per crate, listing every
/// type the crate provides.
///
/// ```ignore
/// xlator_api::export_translators!(MyTranslator, MyOtherTranslator);
/// ```
#[macro_export]
macro_rules! export_translators {
    ($($ty:ty),+ $(,)?) => {
        #[doc(hidden)]
        pub mod __xlfs_export {
            use super::*;
            use $crate::__private::*;

            extern "C" fn types() -> RVec<TypeInfo> {
                let r = ::std::panic::catch_unwind(|| {
                    $crate::sdk::types_of(vec![$($crate::sdk::type_info::<$ty>()),+])
                });
                r.unwrap_or_default()
            }

            extern "C" fn new_xlator(type_name: RStr<'_>, args: InitArgs) -> RResult<Subvol, RString> {
                $crate::sdk::new_by_name(type_name, args, &[
                    $((<$ty as $crate::Translator>::TYPE, $crate::sdk::instantiate::<$ty>)),+
                ])
            }

            extern "C" fn install_log_bridge(log: LogSink, max_level: LogLevel) {
                let _ = ::std::panic::catch_unwind(|| $crate::sdk::install_log_bridge(log, max_level));
            }

            /// The root module (built once).
            pub fn module() -> XlatorModuleRef {
                static M: ::std::sync::OnceLock<XlatorModuleRef> = ::std::sync::OnceLock::new();
                *M.get_or_init(|| XlatorModule { types, install_log_bridge, new_xlator }.leak_into_prefix())
            }

            #[unsafe(export_name = concat!("xlfs_xlator_module_", env!("CARGO_CRATE_NAME")))]
            pub static XLFS_LIB_HEADER: LibHeader = {
                extern "C" fn erased() -> RootModuleResult {
                    __call_root_module_loader(module)
                }
                // SAFETY: `erased` returns the module built by `module()`, of type XlatorModuleRef.
                unsafe { LibHeader::from_constructor::<XlatorModuleRef>(erased, CheckTypeLayout::Yes) }
            };

            #[unsafe(export_name = concat!("xlfs_xlator_build_id_", env!("CARGO_CRATE_NAME")))]
            pub extern "C" fn build_id() -> *const ::std::ffi::c_char {
                ::std::panic::catch_unwind($crate::abi_internals::build_id_c)
                    .unwrap_or(::std::ptr::null())
            }

            /// The ABI manifest the build id hashes: the loader compares it with its own to
            /// name the types that differ.
            #[unsafe(export_name = concat!("xlfs_xlator_abi_manifest_", env!("CARGO_CRATE_NAME")))]
            pub extern "C" fn abi_manifest() -> *const ::std::ffi::c_char {
                ::std::panic::catch_unwind($crate::abi_internals::manifest_c)
                    .unwrap_or(::std::ptr::null())
            }

            $crate::__private::inventory::submit! {
                StaticModule { crate_name: env!("CARGO_CRATE_NAME"), module }
            }
        }
    };
}

/// A lock owner no other caller of this function in the process uses (a random base, so two
/// clients' owners differ too).
pub fn new_lock_owner() -> crate::types::LkOwner {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    let base = u64::from_le_bytes(
        crate::types::Gfid::random().0[..8]
            .try_into()
            .unwrap_or([7; 8]),
    );
    crate::types::LkOwner(base ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Entry locks (`entrylk`) one owner holds on one child: the names a cluster translator
/// serialises namespace changes on across its clients (distribute's directory locks,
/// stripe's name locks), so that every child takes the changes of one name in one order.
pub struct NameLocks {
    owner: crate::types::LkOwner,
    domain: String,
    locs: Vec<crate::types::Loc>,
}

impl NameLocks {
    /// Locks `locs` in `domain` on `child`, in one order every client uses (two renames of
    /// crossed names never each hold one), waiting for each when `wait`; EAGAIN (nothing
    /// kept) when one is busy and not `wait`. A child without lock support (ENOSYS) is used
    /// unlocked. When waiting, a name whose lock fails otherwise (its parent gone or not a
    /// directory, the child not answering) stays unlocked: the fop itself then fails there
    /// with the error its caller expects.
    pub async fn lock(
        child: &Subvol,
        domain: &str,
        locs: &[&crate::types::Loc],
        wait: bool,
    ) -> Result<NameLocks, Errno> {
        use crate::types::{EntrylkCmd, Loc};
        let mut sorted: Vec<Loc> = locs.iter().map(|l| (*l).clone()).collect();
        sorted.sort_by(|a, b| (a.parent.0, a.name.as_str()).cmp(&(b.parent.0, b.name.as_str())));
        sorted.dedup_by(|a, b| a.parent == b.parent && a.name == b.name);
        let mut held = NameLocks {
            owner: new_lock_owner(),
            domain: domain.to_owned(),
            locs: Vec::new(),
        };
        let cmd = if wait {
            EntrylkCmd::Lock
        } else {
            EntrylkCmd::LockNonBlocking
        };
        for loc in sorted {
            let cx = Ctx::builder(0, 0).lk_owner(held.owner).build();
            match child.entrylk(&cx, domain.into(), loc.clone(), cmd).await {
                Ok(()) => held.locs.push(loc),
                Err(Errno::ENOSYS) => {}
                Err(e) if wait && !matches!(e, Errno::EAGAIN | Errno::EBUSY) => {}
                Err(e) => {
                    held.unlock(child).await;
                    return Err(e);
                }
            }
        }
        Ok(held)
    }

    /// Gives the locks back, the last taken first; the names whose unlock failed, with the
    /// error (freed anyway when this client's connection to the child goes).
    pub async fn unlock(self, child: &Subvol) -> Vec<(crate::types::Loc, Errno)> {
        use crate::types::EntrylkCmd;
        let cx = Ctx::builder(0, 0).lk_owner(self.owner).build();
        let mut failed = Vec::new();
        for loc in self.locs.into_iter().rev() {
            let r = child
                .entrylk(
                    &cx,
                    self.domain.as_str().into(),
                    loc.clone(),
                    EntrylkCmd::Unlock,
                )
                .await;
            if let Err(e) = r {
                failed.push((loc, e));
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, next_offset: u64) -> DirEntry {
        DirEntry {
            name: name.into(),
            next_offset,
            attr: Iatt::default(),
            xattrs: Default::default(),
        }
    }

    /// A child's listing in pages of two at offsets 0, 2, 4; `gone` names are left out.
    async fn page(offset: u64, gone: &[&str]) -> Result<(Option<u64>, RVec<DirEntry>), Errno> {
        let all = ["a", "b", "c", "d", "e"];
        let list: Vec<DirEntry> = all
            .iter()
            .enumerate()
            .skip(offset as usize)
            .take(2)
            .map(|(i, n)| entry(n, i as u64 + 1))
            .collect();
        let next = list.last().map(|e| e.next_offset);
        let kept = list
            .into_iter()
            .filter(|e| !gone.contains(&e.name.as_str()))
            .collect();
        Ok((next, kept))
    }

    #[test]
    fn a_listing_page_reads_past_pages_whose_entries_were_all_left_out() {
        let names = |v: RVec<DirEntry>| v.iter().map(|e| e.name.to_string()).collect::<Vec<_>>();
        let run = |offset, gone: &'static [&'static str]| {
            futures::executor::block_on(listing_page(offset, |o| page(o, gone))).map(names)
        };
        assert_eq!(run(0, &[]), Ok(vec!["a".into(), "b".into()]));
        assert_eq!(run(0, &["a", "b", "c", "d"]), Ok(vec!["e".to_string()]));
        assert_eq!(
            run(0, &["a"]),
            Ok(vec!["b".to_string()]),
            "kept entries end the page"
        );
        assert_eq!(
            run(2, &["c", "d", "e"]),
            Ok(vec![]),
            "the listing's end is the end"
        );
        assert_eq!(run(5, &[]), Ok(vec![]));
    }
}
