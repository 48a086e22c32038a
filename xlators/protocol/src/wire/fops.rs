//! Wire messages generated from the fop table: [`Request`] (one variant per fop, its typed
//! arguments) and [`ReplyBody`] (one variant per fop, its typed reply). Adding a fop to
//! `xlator_api::for_each_fop!` adds it here with no edit.
//!
//! Bulk data never goes through the serializer: every argument or reply of type [`Buf`] is moved
//! out of the message before encoding ([`Request::take_payload`]) and appended raw after the
//! header; after decoding it is put back as a slice of the received frame
//! ([`Request::restore_payload`]), so it is not copied. The choice is made per argument *type*
//! with autoref specialisation ([`Slot`]): `Buf` takes the payload path, every other type stays
//! in the header.

use serde::{Deserialize, Serialize};
use xlator_api::{Buf, Errno, Fd, Fop};

use super::{Payloads, WireError};

/// A mutable view of one fop argument, for per-type handling in generated code.
pub struct Slot<'a, T>(pub &'a mut T);

/// `Buf` arguments travel as raw payload.
pub trait BufSlot {
    fn take_payload(&mut self, out: &mut Vec<Buf>);
    fn restore_payload(&mut self, src: &mut Payloads) -> Result<(), WireError>;
}

impl BufSlot for Slot<'_, Buf> {
    fn take_payload(&mut self, out: &mut Vec<Buf>) {
        out.push(std::mem::take(self.0));
    }
    fn restore_payload(&mut self, src: &mut Payloads) -> Result<(), WireError> {
        if !self.0.is_empty() {
            return Err(WireError::InlinePayload);
        }
        *self.0 = src.next_payload()?;
        Ok(())
    }
}

/// A `readv` reply's data travels as raw payload; its attributes stay in the header.
impl BufSlot for Slot<'_, xlator_api::ReadReply> {
    fn take_payload(&mut self, out: &mut Vec<Buf>) {
        out.push(std::mem::take(&mut self.0.data));
    }
    fn restore_payload(&mut self, src: &mut Payloads) -> Result<(), WireError> {
        Slot(&mut self.0.data).restore_payload(src)
    }
}

/// Every other argument stays in the header.
pub trait PlainSlot {
    fn take_payload(&mut self, _out: &mut Vec<Buf>) {}
    fn restore_payload(&mut self, _src: &mut Payloads) -> Result<(), WireError> {
        Ok(())
    }
}

impl<T> PlainSlot for &mut Slot<'_, T> {}

/// A visitor of `Fd` arguments.
pub type FdVisitor<'a> = dyn FnMut(&mut Fd) -> Result<(), Errno> + 'a;

/// `Fd` arguments are visited (the server maps client fd ids to its own; the client re-opens
/// fds after a reconnect).
pub trait FdSlot {
    fn visit_fd(&mut self, f: &mut FdVisitor<'_>) -> Result<(), Errno>;
}

impl FdSlot for Slot<'_, Fd> {
    fn visit_fd(&mut self, f: &mut FdVisitor<'_>) -> Result<(), Errno> {
        f(self.0)
    }
}

/// Arguments that are not fds.
pub trait NotFdSlot {
    fn visit_fd(&mut self, _f: &mut FdVisitor<'_>) -> Result<(), Errno> {
        Ok(())
    }
}

impl<T> NotFdSlot for &mut Slot<'_, T> {}

const fn fnv1a(s: &str) -> u64 {
    let b = s.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

macro_rules! gen_wire {
    ($( $(#[doc = $doc:expr])* $name:ident $Variant:ident {$($attrs:tt)*} ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// A fop request: its arguments, with `Buf` arguments emptied (they are the payload).
        #[derive(Serialize, Deserialize, Debug)]
        pub enum Request {
            $( $(#[doc = $doc])* $Variant { $($arg: $ty),* }, )*
        }

        /// A fop's successful reply, with a `Buf` reply emptied (it is the payload).
        #[derive(Serialize, Deserialize, Debug)]
        pub enum ReplyBody {
            $( $Variant($ret), )*
        }

        /// The fop table as text: its fingerprint ([`SCHEMA`]) is compared at handshake, so
        /// peers built from different fop tables refuse each other instead of misreading.
        pub const SCHEMA_TEXT: &str = concat!($(
            stringify!($name), "(", $(stringify!($arg), ":", stringify!($ty), ",",)* ")->",
            stringify!($ret), ";",
        )*);

        impl Request {
            /// The fop this request calls.
            pub fn fop(&self) -> Fop {
                match self { $( Request::$Variant { .. } => Fop::$Variant, )* }
            }

            /// Moves every `Buf` argument into `out`, in argument order.
            pub fn take_payload(&mut self, out: &mut Vec<Buf>) {
                match self {
                    $( Request::$Variant { $($arg),* } => {
                        $( (&mut Slot($arg)).take_payload(out); )*
                    } )*
                }
            }

            /// Puts the received payloads back into the `Buf` arguments.
            pub fn restore_payload(&mut self, src: &mut Payloads) -> Result<(), WireError> {
                match self {
                    $( Request::$Variant { $($arg),* } => {
                        $( (&mut Slot($arg)).restore_payload(src)?; )*
                    } )*
                }
                src.finish()
            }

            /// Calls `f` on every `Fd` argument.
            pub fn visit_fds(&mut self, f: &mut FdVisitor<'_>) -> Result<(), Errno> {
                match self {
                    $( Request::$Variant { $($arg),* } => {
                        $( (&mut Slot($arg)).visit_fd(f)?; )*
                    } )*
                }
                Ok(())
            }
        }

        impl ReplyBody {
            /// The fop this reply answers.
            pub fn fop(&self) -> Fop {
                match self { $( ReplyBody::$Variant(_) => Fop::$Variant, )* }
            }

            /// Moves a `Buf` reply into `out`.
            pub fn take_payload(&mut self, out: &mut Vec<Buf>) {
                match self {
                    $( ReplyBody::$Variant(r) => (&mut Slot(r)).take_payload(out), )*
                }
            }

            /// Puts the received payload back into a `Buf` reply.
            pub fn restore_payload(&mut self, src: &mut Payloads) -> Result<(), WireError> {
                match self {
                    $( ReplyBody::$Variant(r) => (&mut Slot(r)).restore_payload(src)?, )*
                }
                src.finish()
            }
        }
    };
}
xlator_api::for_each_fop!(gen_wire);

/// Fingerprint of [`SCHEMA_TEXT`].
pub const SCHEMA: u64 = fnv1a(SCHEMA_TEXT);

#[cfg(test)]
mod tests {
    use super::*;
    use xlator_api::{FdId, Gfid, Loc};

    #[test]
    fn bufs_go_to_payload_and_come_back() {
        let data = Buf::from_vec(vec![7; 1000]);
        let fd = Fd {
            id: FdId(3),
            gfid: Gfid::ROOT,
            flags: 2,
        };
        let mut req = Request::Writev {
            fd,
            offset: 5,
            data: data.clone(),
            flags: 0,
        };
        let mut out = Vec::new();
        req.take_payload(&mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].shares_storage_with(&data));
        match &req {
            Request::Writev { data, .. } => assert!(data.is_empty()),
            other => panic!("{other:?}"),
        }
        let mut src = Payloads::new(out);
        req.restore_payload(&mut src).expect("restore");
        match &req {
            Request::Writev { data: d, .. } => assert!(d.shares_storage_with(&data)),
            other => panic!("{other:?}"),
        }
        let mut fds = Vec::new();
        req.visit_fds(&mut |f| {
            fds.push(*f);
            Ok(())
        })
        .expect("visit");
        assert_eq!(fds, vec![fd]);
    }

    #[test]
    fn non_buf_requests_have_no_payload_and_reject_extra() {
        let mut req = Request::Lookup {
            loc: Loc::new(Gfid::ROOT, "x"),
        };
        let mut out = Vec::new();
        req.take_payload(&mut out);
        assert!(out.is_empty());
        let mut src = Payloads::new(vec![Buf::from("extra")]);
        assert!(req.restore_payload(&mut src).is_err());
        assert_eq!(req.fop(), Fop::Lookup);
    }

    #[test]
    fn readv_reply_payload_round_trips() {
        let data = Buf::from_vec(vec![1; 10]);
        let attr = xlator_api::Iatt {
            size: 10,
            ..Default::default()
        };
        let mut body = ReplyBody::Readv(xlator_api::ReadReply {
            data: data.clone(),
            attr: xlator_api::abi_stable::std_types::ROption::RSome(attr),
        });
        let mut out = Vec::new();
        body.take_payload(&mut out);
        assert_eq!(out.len(), 1);
        body.restore_payload(&mut Payloads::new(out))
            .expect("restore");
        let ReplyBody::Readv(r) = body else {
            panic!("not a readv reply")
        };
        assert!(r.data.shares_storage_with(&data));
        assert_eq!(r.attr.into_option().map(|a| a.size), Some(10));
    }

    #[test]
    fn schema_covers_every_fop() {
        for f in Fop::ALL {
            assert!(SCHEMA_TEXT.contains(&format!("{}(", f.name())), "{f}");
        }
        assert_ne!(SCHEMA, 0);
    }
}
