//! rchecksum: checksums of a range of a file, so replicas can compare chunks for diff
//! self-heal without moving their data. The range is read through the fd like `readv`
//! (anonymous fds open the object for the one call); at end of file the read, and so `len`,
//! is short.

use sha2::{Digest, Sha256};
use xlator_api::{Errno, Fd, Rchecksum};

use crate::brick::Brick;

impl Brick {
    pub fn rchecksum(&self, fd: &Fd, offset: u64, len: u32) -> Result<Rchecksum, Errno> {
        let f = self.file_for(fd, libc::O_RDONLY)?;
        let data = self.read_file(&f, offset, len, Vec::new())?;
        let bytes = data.as_slice();
        Ok(Rchecksum {
            len: u32::try_from(bytes.len()).map_err(|_| Errno::EIO)?,
            weak: adler2::adler32_slice(bytes),
            strong: Sha256::digest(bytes).into(),
        })
    }
}
