//! The MOUNT v3 program (RFC 1813 appendix I) and a minimal portmapper, both served on the NFS
//! port so clients can skip rpcbind (`nfsport=P&mountport=P` in libnfs URLs).
//!
//! Exports: `/` is the volume's root; `/<volume>` is an alias for it (GlusterFS gNFS names
//! exports that way), and a longer path mounts a subdirectory, looked up as the caller.

use std::collections::BTreeSet;
use std::sync::Mutex;

use nfs3_types::mount::{
    dirpath, export_node, exports, fhandle3, mountbody, mountlist, mountres3, mountres3_ok,
    mountstat3, name,
};
use nfs3_types::portmap::{IPPROTO_TCP, mapping};
use nfs3_types::rpc::{accept_stat_data, auth_flavor};
use nfs3_types::xdr_codec::{List, Opaque, Void};
use xlator_api::{Ctx, Errno, Gfid, Loc};

use crate::nfs::Nfs;
use crate::rpc::{self, Call};

pub const MOUNT_PROGRAM: u32 = nfs3_types::mount::PROGRAM;
pub const MOUNT_VERSION: u32 = nfs3_types::mount::VERSION;
pub const PORTMAP_PROGRAM: u32 = nfs3_types::portmap::PROGRAM;
pub const PORTMAP_VERSION: u32 = nfs3_types::portmap::VERSION;
pub const NFS_PROGRAM: u32 = nfs3_types::nfs3::PROGRAM;
pub const NFS_VERSION: u32 = nfs3_types::nfs3::VERSION;

/// MOUNT's state: the export's name and who mounted what (for DUMP; advisory, as everywhere).
pub struct Mountd {
    volume: String,
    allow: Vec<String>,
    mounts: Mutex<BTreeSet<(String, String)>>,
}

impl Mountd {
    pub fn new(volume: String, allow: Vec<String>) -> Mountd {
        Mountd {
            volume,
            allow,
            mounts: Mutex::new(BTreeSet::new()),
        }
    }

    /// The path components below the volume root that `path` names.
    fn components<'a>(&self, path: &'a str) -> Vec<&'a str> {
        let mut parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        if parts.first() == Some(&self.volume.as_str()) {
            parts.remove(0);
        }
        parts
    }

    /// Serves one MOUNT call. `allowed`: the peer is on the export's allow-list.
    pub async fn dispatch(
        &self,
        nfs: &Nfs,
        call: &Call,
        record: &[u8],
        cx: &Ctx,
        peer: &str,
        allowed: bool,
    ) -> Vec<u8> {
        let xid = call.xid;
        let garbage = || rpc::accept_error(xid, accept_stat_data::GARBAGE_ARGS);
        match call.proc {
            0 => rpc::success(xid, &Void),
            1 => {
                let Some(path) = rpc::decode_args::<dirpath<'static>>(record, call.args_at) else {
                    return garbage();
                };
                let path = String::from_utf8_lossy(&path.0).into_owned();
                let res = if allowed {
                    self.mnt(nfs, cx, &path).await
                } else {
                    tracing::warn!(peer, path, "mount refused: client not in the allow-list");
                    Err(mountstat3::MNT3ERR_ACCES)
                };
                match res {
                    Ok(gfid) => {
                        if let Ok(mut m) = self.mounts.lock() {
                            m.insert((peer.to_string(), path.clone()));
                        }
                        tracing::debug!(peer, path, "mounted");
                        let ok = mountres3_ok {
                            fhandle: fhandle3(nfs.codec().encode(gfid).data),
                            auth_flavors: vec![
                                auth_flavor::AUTH_UNIX as u32,
                                auth_flavor::AUTH_NULL as u32,
                            ],
                        };
                        rpc::success(xid, &mountres3::Ok(ok))
                    }
                    Err(s) => rpc::success(xid, &mountres3::Err(s)),
                }
            }
            2 => {
                let list: Vec<mountbody<'static, 'static>> = self
                    .mounts
                    .lock()
                    .map(|m| {
                        m.iter()
                            .map(|(host, dir)| mountbody {
                                ml_hostname: name(Opaque::owned(host.clone().into_bytes())),
                                ml_directory: dirpath(Opaque::owned(dir.clone().into_bytes())),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let list: mountlist<'static, 'static> = List(list);
                rpc::success(xid, &list)
            }
            3 => {
                let Some(path) = rpc::decode_args::<dirpath<'static>>(record, call.args_at) else {
                    return garbage();
                };
                let path = String::from_utf8_lossy(&path.0).into_owned();
                if let Ok(mut m) = self.mounts.lock() {
                    m.remove(&(peer.to_string(), path));
                }
                rpc::success(xid, &Void)
            }
            4 => {
                if let Ok(mut m) = self.mounts.lock() {
                    m.retain(|(h, _)| h != peer);
                }
                rpc::success(xid, &Void)
            }
            5 => {
                let groups = self
                    .allow
                    .iter()
                    .map(|a| name(Opaque::owned(a.clone().into_bytes())))
                    .collect();
                let list: exports<'static, 'static> = List(vec![export_node {
                    ex_dir: dirpath(Opaque::owned(b"/".to_vec())),
                    ex_groups: List(groups),
                }]);
                rpc::success(xid, &list)
            }
            _ => rpc::accept_error(xid, accept_stat_data::PROC_UNAVAIL),
        }
    }

    /// The GFID the export path names, looked up as the caller.
    async fn mnt(&self, nfs: &Nfs, cx: &Ctx, path: &str) -> Result<Gfid, mountstat3> {
        let g = nfs.graph();
        let mut gfid = Gfid::ROOT;
        for c in self.components(path) {
            let e = g
                .top()
                .lookup(cx, Loc::new(gfid, c))
                .await
                .map_err(mount_status)?;
            if !e.attr.is_dir() {
                return Err(mountstat3::MNT3ERR_NOTDIR);
            }
            gfid = e.attr.gfid;
        }
        // The volume must answer (a graph whose bricks are down is not mountable).
        g.top().stat(cx, gfid).await.map_err(mount_status)?;
        Ok(gfid)
    }
}

fn mount_status(e: Errno) -> mountstat3 {
    match e.0 {
        libc::ENOENT | libc::ESTALE => mountstat3::MNT3ERR_NOENT,
        libc::EACCES | libc::EPERM => mountstat3::MNT3ERR_ACCES,
        libc::ENOTDIR => mountstat3::MNT3ERR_NOTDIR,
        libc::ENAMETOOLONG => mountstat3::MNT3ERR_NAMETOOLONG,
        libc::EINVAL => mountstat3::MNT3ERR_INVAL,
        _ => mountstat3::MNT3ERR_IO,
    }
}

/// Portmapper v2 NULL, GETPORT and DUMP, answering for this server only.
pub fn portmap(call: &Call, record: &[u8], port: u16) -> Vec<u8> {
    let xid = call.xid;
    let ours = [
        (NFS_PROGRAM, NFS_VERSION),
        (MOUNT_PROGRAM, MOUNT_VERSION),
        (PORTMAP_PROGRAM, PORTMAP_VERSION),
    ];
    match call.proc {
        0 => rpc::success(xid, &Void),
        3 => {
            let Some(m) = rpc::decode_args::<mapping>(record, call.args_at) else {
                return rpc::accept_error(xid, accept_stat_data::GARBAGE_ARGS);
            };
            let found = m.prot == IPPROTO_TCP && ours.contains(&(m.prog, m.vers));
            rpc::success(xid, &if found { u32::from(port) } else { 0 })
        }
        4 => {
            let list: List<mapping> = List(
                ours.iter()
                    .map(|&(prog, vers)| mapping {
                        prog,
                        vers,
                        prot: IPPROTO_TCP,
                        port: u32::from(port),
                    })
                    .collect(),
            );
            rpc::success(xid, &list)
        }
        _ => rpc::accept_error(xid, accept_stat_data::PROC_UNAVAIL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_paths() {
        let m = Mountd::new("vol".into(), vec![]);
        assert!(m.components("/").is_empty());
        assert!(m.components("").is_empty());
        assert!(m.components("/vol").is_empty());
        assert!(m.components("/vol/").is_empty());
        assert_eq!(m.components("/vol/a/b"), ["a", "b"]);
        assert_eq!(m.components("/a//b/"), ["a", "b"]);
        assert_eq!(m.components("/volume"), ["volume"]);
    }
}
