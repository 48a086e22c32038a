//! Direct and buffered I/O mixed on one file (generic/451).

use super::*;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `struct iocb` of linux/aio_abi.h (little-endian layout).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PWRITE: u16 = 1;

/// A page-aligned buffer, as O_DIRECT wants.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len, 4096).expect("layout");
        // SAFETY: a non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, layout }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// One asynchronous direct write (io_submit), waited for with io_getevents.
fn aio_pwrite(ctx: libc::c_ulong, fd: i32, buf: &mut Aligned, offset: i64) -> i64 {
    let mut cb = Iocb {
        opcode: IOCB_CMD_PWRITE,
        fildes: fd as u32,
        buf: buf.ptr as u64,
        nbytes: buf.layout.size() as u64,
        offset,
        ..Iocb::default()
    };
    let mut list = [&mut cb as *mut Iocb];
    // SAFETY: one valid iocb whose buffer outlives the wait below.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_submit,
            ctx,
            1 as libc::c_long,
            list.as_mut_ptr(),
        )
    };
    assert_eq!(r, 1, "io_submit: {}", std::io::Error::last_os_error());
    let mut ev = [IoEvent::default()];
    // SAFETY: room for one event; no timeout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_getevents,
            ctx,
            1 as libc::c_long,
            1 as libc::c_long,
            ev.as_mut_ptr(),
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
    assert_eq!(r, 1, "io_getevents: {}", std::io::Error::last_os_error());
    ev[0].res
}

/// A buffered read after an asynchronous direct write of the same range returns the new
/// data, while another thread keeps the range in the page cache with buffered reads
/// (generic/451, xfstests' aio-dio-cycle-write). With FUSE_ASYNC_DIO the kernel queues the
/// direct write and skips invalidating the cached pages when it completes.
#[test]
fn a_buffered_read_after_an_async_direct_write_sees_it() {
    require_fuse!();
    for extra in [&[][..], &["--no-writeback-cache"]] {
        async_direct_writes_then_buffered_reads(extra);
    }
}

fn async_direct_writes_then_buffered_reads(extra: &[&str]) {
    let tmp = tempdir();
    let (m, mnt) = mounted(&tmp, extra);
    const LEN: usize = 64 << 10;
    let path = mnt.join("f");
    fs::write(&path, vec![0u8; LEN]).expect("write");
    let direct = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .expect("open O_DIRECT");
    let buffered = Arc::new(File::open(&path).expect("open buffered"));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (f, stop) = (buffered.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut b = vec![0u8; LEN];
            while !stop.load(Ordering::Relaxed) {
                let _ = f.read_at(&mut b, 0);
            }
        })
    };
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the new context into `ctx`.
    let r = unsafe { libc::syscall(libc::SYS_io_setup, 8 as libc::c_long, &mut ctx) };
    assert_eq!(r, 0, "io_setup: {}", std::io::Error::last_os_error());
    let mut buf = Aligned::new(LEN);
    let mut got = vec![0u8; LEN];
    let mut stale = None;
    for i in 1..=300u32 {
        let fill = (i % 251 + 1) as u8;
        buf.bytes().fill(fill);
        let res = aio_pwrite(ctx, direct.as_raw_fd(), &mut buf, 0);
        assert_eq!(res, LEN as i64, "aio write {i}");
        buffered.read_exact_at(&mut got, 0).expect("buffered read");
        if let Some(at) = got.iter().position(|b| *b != fill) {
            stale = Some((i, at, got[at], fill));
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
    // SAFETY: the context made above, no I/O in flight.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    assert_eq!(stale, None, "{extra:?}: (round, offset, read, written)");
    drop(m);
}
