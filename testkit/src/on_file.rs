//! [`call_on`]: a call of any fop of the table aimed at one file, generated from the table, so a
//! test can walk [`Fop::ALL`] and check a translator's behaviour for every fop (write-behind's
//! ordering, the caches' invalidation).
//!
//! Arguments come from their type and name: the `Fd` is the given one, a `Gfid` is its file,
//! a `Loc` is the name "f" in the root, a `SetAttr` truncates to 0, `len`/`size` are 4096, a
//! `Buf` is 10 bytes, and everything else is [`Sample`].

use std::any::{Any, TypeId};

use xlator_api::abi_stable::std_types::ROption::RSome;
use xlator_api::{Buf, Fd, Fop, Gfid, Loc, SetAttr};

use crate::every_fop::Sample;
use crate::mock::FopCall;

/// Argument `name` of type `T` for a call on the file of `fd`.
fn arg<T: Sample + Any>(fd: Fd, name: &str) -> T {
    let t = TypeId::of::<T>();
    let v: Box<dyn Any> = if t == TypeId::of::<Fd>() {
        Box::new(fd)
    } else if t == TypeId::of::<Gfid>() {
        Box::new(fd.gfid)
    } else if t == TypeId::of::<Loc>() {
        Box::new(Loc::new(Gfid::ROOT, "f"))
    } else if t == TypeId::of::<SetAttr>() {
        Box::new(SetAttr {
            size: RSome(0),
            ..SetAttr::default()
        })
    } else if t == TypeId::of::<Buf>() {
        Box::new(Buf::from("0123456789"))
    } else if (name == "len" || name == "size") && t == TypeId::of::<u64>() {
        Box::new(4096u64)
    } else if (name == "len" || name == "size") && t == TypeId::of::<u32>() {
        Box::new(4096u32)
    } else {
        return T::sample();
    };
    match v.downcast::<T>() {
        Ok(v) => *v,
        Err(_) => unreachable!("the value was built for this very type"),
    }
}

macro_rules! gen_call_on {
    ($( $(#[$meta:meta])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// A call of `fop` on the file of `fd`.
        pub fn call_on(fop: Fop, fd: Fd) -> FopCall {
            match fop {
                $( Fop::$Variant => FopCall::$Variant {
                    $( $arg: arg::<$ty>(fd, stringify!($arg)) ),*
                }, )*
            }
        }
    };
}
xlator_api::for_each_fop!(gen_call_on);
