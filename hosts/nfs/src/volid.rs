//! The volume id in NFS file handles, derived from what identifies the data.

use xlfs_core::volfile::Volfile;

use crate::handle::VolumeId;

/// The volume id: from `--fsid` when given, else from what identifies the data: the top
/// volume's name and each leaf's type and options (brick directories, remote bricks). Caching
/// and other middle layers do not count, so adding write-behind keeps handles valid.
pub fn volume_id(vf: &Volfile, fsid: Option<&str>) -> VolumeId {
    if let Some(name) = fsid {
        return VolumeId::derive(&format!("fsid:{name}"));
    }
    let mut d = format!("volume:{}", vf.top_name());
    for v in vf.volumes.iter().filter(|v| v.subvolumes.is_empty()) {
        let mut opts: Vec<String> = v
            .options
            .iter()
            .map(|o| format!("{}={}", o.key, o.value))
            .collect();
        opts.sort();
        d.push_str(&format!("|{}:{}", v.type_name, opts.join(",")));
    }
    VolumeId::derive(&d)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use xlfs_core::source::local_volfile;

    use super::*;

    #[test]
    fn ids_follow_the_brick() {
        let text = local_volfile(Path::new("/tmp/a \"b\"\\c/brick")).expect("volfile");
        let vf = Volfile::parse(&text, "<test>").expect("parses");
        let again = Volfile::parse(&text, "<other origin>").expect("parses");
        assert_eq!(volume_id(&vf, None), volume_id(&again, None));
        let other = local_volfile(Path::new("/tmp/other/brick")).expect("volfile");
        let other = Volfile::parse(&other, "<test>").expect("parses");
        assert_ne!(volume_id(&vf, None), volume_id(&other, None));
        assert_eq!(volume_id(&vf, Some("x")), volume_id(&other, Some("x")));
    }
}
