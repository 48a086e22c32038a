//! `test/probe`: a pass-through that notes what reaches it (the extensions of each request,
//! the `forget_client` calls) and, for a leaf that does not fill them yet, answers an
//! `XattrReq` in lookup and readdirp replies with getxattr on its child.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use abi_stable::std_types::{RString, RVec};
use xlator_api::{
    ClientId, Ctx, DirEntry, Entry, Errno, Fd, Gfid, Iatt, Init, Loc, Subvol, Translator, Xattr,
    XattrReq,
};

/// What one probe instance saw.
#[derive(Default)]
pub struct Log {
    /// Per `stat`: the ClientId and every extension key it came with.
    pub stats: Mutex<Vec<(Option<ClientId>, Vec<String>)>>,
    /// The clients `forget_client` named.
    pub forgotten: Mutex<Vec<ClientId>>,
    /// The fd of every `fstat`.
    pub fstat_fds: Mutex<Vec<Fd>>,
}

static LOGS: Mutex<Option<HashMap<String, Arc<Log>>>> = Mutex::new(None);

/// The log of the probe instance `name`.
pub fn log(name: &str) -> Arc<Log> {
    LOGS.lock()
        .expect("logs")
        .get_or_insert_with(HashMap::new)
        .entry(name.to_owned())
        .or_default()
        .clone()
}

pub struct Probe {
    children: Vec<Subvol>,
    log: Arc<Log>,
}

impl Probe {
    async fn xattrs(&self, cx: &Ctx, gfid: Gfid, want: &XattrReq) -> RVec<Xattr> {
        let mut out = RVec::new();
        for name in &want.names {
            if let Ok(value) = self.children[0]
                .getxattr(cx, gfid, RString::from(name.as_str()))
                .await
            {
                out.push(Xattr {
                    name: name.as_str().into(),
                    value,
                });
            }
        }
        out
    }
}

impl Translator for Probe {
    const TYPE: &'static str = "test/probe";
    type Options = ();
    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(Probe {
            log: log(&init.name),
            children: init.children,
        })
    }
    fn children(&self) -> &[Subvol] {
        &self.children
    }
    async fn stat(&self, cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        let keys = cx.extensions().map(|(k, _)| k.to_owned()).collect();
        self.log
            .stats
            .lock()
            .expect("stats")
            .push((cx.ext::<ClientId>(), keys));
        self.children[0].stat(cx, gfid).await
    }
    async fn fstat(&self, cx: &Ctx, fd: Fd) -> Result<Iatt, Errno> {
        self.log.fstat_fds.lock().expect("fds").push(fd);
        self.children[0].fstat(cx, fd).await
    }
    async fn lookup(&self, cx: &Ctx, loc: Loc) -> Result<Entry, Errno> {
        let mut e = self.children[0].lookup(cx, loc).await?;
        if let Some(want) = cx.ext::<XattrReq>()
            && e.xattrs.is_empty()
        {
            e.xattrs = self.xattrs(cx, e.attr.gfid, &want).await;
        }
        Ok(e)
    }
    async fn readdirp(
        &self,
        cx: &Ctx,
        fd: Fd,
        offset: u64,
        size: u32,
    ) -> Result<RVec<DirEntry>, Errno> {
        let mut es = self.children[0].readdirp(cx, fd, offset, size).await?;
        if let Some(want) = cx.ext::<XattrReq>() {
            for e in es.iter_mut() {
                if e.xattrs.is_empty() && e.name.as_str() != "." && e.name.as_str() != ".." {
                    e.xattrs = self.xattrs(cx, e.attr.gfid, &want).await;
                }
            }
        }
        Ok(es)
    }
    async fn forget_client(&self, cx: &Ctx, client: ClientId) -> Result<(), Errno> {
        self.log.forgotten.lock().expect("forgotten").push(client);
        match self.children[0].forget_client(cx, client).await {
            Err(Errno::ENOSYS | Errno::ENOTSUP) => Ok(()),
            r => r,
        }
    }
}
