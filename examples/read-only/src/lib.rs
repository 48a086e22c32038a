//! `features/read-only`: makes a volume read-only. Every fop the fop table marks as modifying
//! ([`Fop::modifies`]: data, size, metadata or namespace) fails with EROFS; everything else
//! (reads, lookups, listings, locks, syncs, host-only fops) passes through. Opening for writing
//! fails too, so applications learn early. The `read-only` option can be switched on a running
//! volume (`reconfigure`), which is how an admin freezes a volume without a remount.
//!
//! No fop is listed here by hand: the overrides are generated for the whole table by
//! [`xlator_api::for_each_fop!`], so a fop added to the table with a modifying attribute is
//! refused without an edit here. The one refinement is `open`, whose table entry says it
//! may truncate: it is refused only when its flags ask for writing or truncation.

use std::sync::atomic::{AtomicBool, Ordering};

use xlator_api::{Ctx, Errno, Fd, Fop, Init, Subvol, Translator};

xlator_api::options! {
    /// Options of `features/read-only`.
    pub struct ReadOnlyOptions {
        /// Refuse modifications. Switch it off to let writes through again.
        pub read_only: bool = OptionSpec::bool("read-only", "on").reconfigurable(),
    }
}

pub struct ReadOnly {
    children: Vec<Subvol>,
    on: AtomicBool,
}

impl ReadOnly {
    /// The one child (the default `MIN_CHILDREN`/`MAX_CHILDREN` of 1 guarantee it).
    fn child(&self) -> &Subvol {
        &self.children[0]
    }
    /// EROFS when read-only is on.
    fn check(&self) -> Result<(), Errno> {
        if self.on.load(Ordering::Relaxed) {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }
}

/// Whether an open with these flags can change the file (write access or O_TRUNC).
fn open_writes(fd: &Fd) -> bool {
    fd.flags & libc_o::ACCMODE != libc_o::RDONLY || fd.flags & libc_o::TRUNC != 0
}

/// The open(2) flag bits this translator looks at (Linux values).
mod libc_o {
    pub const ACCMODE: i32 = 0o3;
    pub const RDONLY: i32 = 0;
    pub const TRUNC: i32 = 0o1000;
}

/// Whether this call of a modifying fop would modify: always, except an `open` whose flags
/// neither write nor truncate. Matched on the fop's name, so it needs no argument list.
macro_rules! call_modifies {
    (open $fd:ident) => {
        open_writes(&$fd)
    };
    ($other:ident $($arg:ident)*) => {
        true
    };
}

/// One override per fop of the table: a modifying fop is checked before it goes down.
/// `modifies()` is a const fn of a constant, so each non-modifying override compiles to a
/// plain pass-through.
macro_rules! read_only_fops {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            async fn $name(&self, cx: &Ctx $(, $arg: $ty)*) -> Result<$ret, Errno> {
                if const { Fop::$Variant.modifies() } && call_modifies!($name $($arg)*) {
                    self.check()?;
                }
                self.child().$name(cx $(, $arg)*).await
            }
        )*
    };
}

impl Translator for ReadOnly {
    const TYPE: &'static str = "features/read-only";
    const KEEPS_FILE_DATA: bool = true;
    const DOC: &'static str = "Refuses every modifying fop with EROFS; reconfigurable.";
    type Options = ReadOnlyOptions;

    fn init(init: Init<ReadOnlyOptions>) -> Result<Self, String> {
        Ok(ReadOnly {
            children: init.children,
            on: AtomicBool::new(init.options.read_only),
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    fn reconfigure(&self, options: ReadOnlyOptions) -> Result<(), String> {
        self.on.store(options.read_only, Ordering::Relaxed);
        Ok(())
    }

    xlator_api::for_each_fop!(read_only_fops);
}

xlator_api::export_translators!(ReadOnly);
