//! The options of cluster/replicate. Policies (quorum, read choice, eager locking, heal) are
//! reconfigurable: a change applies to the next fop. The pending-xattr names are not (they
//! name what is stored on the bricks).

use std::time::Duration;

use crate::heal::favorite::Policy;
use crate::quorum::Quorum;
use crate::read::ReadPolicy;

xlator_api::options! {
    /// Options of cluster/replicate.
    pub struct AfrOptions {
        /// Client quorum: `auto` (more than half of the children up; exactly half when it
        /// includes the first child), `fixed` (at least `quorum-count`), `none` (any child),
        /// `default` (`auto` for more than two children, else `none`, as GlusterFS).
        /// Without quorum, modifying fops fail with EROFS before touching anything.
        pub quorum_type: String = OptionSpec::enumeration(
            "quorum-type", "default", &["default", "auto", "fixed", "none"],
        ).reconfigurable(),
        /// Children that must be up (and succeed) for a write with `quorum-type fixed`.
        pub quorum_count: u32 = OptionSpec::int("quorum-count", "0").range(0, 255).reconfigurable(),
        /// Which readable child serves reads: `first-up`, `gfid-hash` (every client picks the
        /// same child per file: server cache locality) or `least-outstanding` (fewest reads in
        /// flight from this client).
        pub read_policy: String = OptionSpec::enumeration(
            "read-policy", "gfid-hash", &["first-up", "gfid-hash", "least-outstanding"],
        ).reconfigurable(),
        /// Keep a file's inode lock and pre-op after a write through an fd, so a stream of
        /// writes costs one round trip per replica per write (GlusterFS `eager-lock`). With
        /// `entry-eager-lock` too, a file created here is made with its hold (the create
        /// carries the locks and the pre-op, where every brick up takes them). Attribute
        /// changes of a directory (`tar x` sets owner, mode and times of each) keep the
        /// directory's metadata lock and pre-op the same way.
        pub eager_lock: bool = OptionSpec::bool("eager-lock", "on").reconfigurable(),
        /// Keep a directory's entry lock and pre-op after a create, mkdir, mknod, symlink,
        /// link, unlink or rmdir in it, so this client's next ones there cost one round trip
        /// per replica instead of three (`tar x`, `rm -rf`); given up at once when another
        /// client wants the directory, and like `eager-lock` after `post-op-delay`. Needs
        /// `eager-lock on`.
        pub entry_eager_lock: bool = OptionSpec::bool("entry-eager-lock", "on").reconfigurable(),
        /// How long an eager lock stays after its last write before the post-op and unlock
        /// (GlusterFS `post-op-delay-secs`, 1 s there); at most 10 times this after it was
        /// taken, however often it is written. Another client's lock, fsync, a truncate and
        /// any failure end it at once. Longer keeps the holds of files written now and then
        /// (random writes over many files); a client that dies leaves its files marked dirty
        /// for the self-heal daemon.
        pub post_op_delay: Duration =
            OptionSpec::duration("post-op-delay", "3s").range(0, 60_000).reconfigurable(),
        /// Take a transaction's locks with its pre-op, and give them back with its post-op,
        /// in one request per child each (features/locks' `LocksAround`; a brick without it
        /// gets separate lock, xattrop and unlock requests, as with `off`): a transaction
        /// costs 3 round trips instead of 5.
        pub lock_with_changelog: bool =
            OptionSpec::bool("lock-with-changelog", "on").reconfigurable(),
        /// Heal on lookup a file or directory whose pending counters blame a child.
        pub self_heal: bool = OptionSpec::bool("self-heal", "on").reconfigurable(),
        /// Read by `xlfs volume start`, not by this translator (GlusterFS keeps the same
        /// option here): run the volume's self-heal daemon on each host with a brick
        /// (`xlfs volume heal VOL --daemon`). Off stops a running daemon at once; on starts
        /// one at the next `xlfs volume start`.
        pub self_heal_daemon: bool = OptionSpec::bool("self-heal-daemon", "on").reconfigurable(),
        /// Heals running in the background at once (more are left to the next lookup);
        /// 0 heals inline, before the lookup answers.
        pub background_self_heal_count: u32 =
            OptionSpec::int("background-self-heal-count", "8").range(0, 1024).reconfigurable(),
        /// Bytes copied per read/write during data heal.
        pub heal_chunk_size: u64 =
            OptionSpec::size("heal-chunk-size", "128KiB").range(4 << 10, 16 << 20).reconfigurable(),
        /// Chunks of one file's data heal in flight at once (GlusterFS
        /// `data-self-heal-window-size`): each is read from the source, or compared, and
        /// written to the sink independently, so a heal over the network is not one round
        /// trip after another. Memory: this times `heal-chunk-size` per file healing.
        pub data_self_heal_window_size: u32 =
            OptionSpec::int("data-self-heal-window-size", "8").range(1, 1024).reconfigurable(),
        /// `full` copies every chunk; `diff` compares chunk checksums (rchecksum) first and
        /// copies only the chunks that differ. Either way, the chunks past the end the sink's
        /// copy had are neither compared nor, when the source's are zeros, written (they
        /// stay holes).
        pub data_self_heal_algorithm: String = OptionSpec::enumeration(
            "data-self-heal-algorithm", "diff", &["full", "diff"],
        ).reconfigurable(),
        /// Which copy heal takes as the source of a file in data or metadata split-brain
        /// (every copy accused by another): `none` (never: reads fail with EIO until an
        /// operator resolves it), `size` (the one largest), `mtime` / `ctime` (the one
        /// newest), `majority` (the copies agreeing on size and mtime in whole seconds, when
        /// more than half of the children). A tie picks nothing. Entry and GFID split-brain are not resolved.
        pub favorite_child_policy: String = OptionSpec::enumeration(
            "favorite-child-policy", "none", &["none", "size", "mtime", "ctime", "majority"],
        ).reconfigurable(),
        /// Names of the pending-counter xattrs, one per child, comma-separated (GlusterFS
        /// `afr-pending-xattr`); empty: `trusted.afr.<child name>` (volgen names children
        /// `<vol>-client-<i>`). They must stay the same for the life of the volume.
        pub pending_xattrs: String = OptionSpec::string("pending-xattrs", ""),
        /// `1`: the last child is an arbiter (`replica 3 arbiter 1`; its brick runs
        /// features/arbiter): it keeps names, metadata and counters and takes part in every
        /// transaction and in quorum, but holds no file data, so file data and attributes
        /// are never read from it, it is never a data heal's source, and a write that would
        /// leave it the only good copy of a file's data fails (ENOTCONN). Fixed for the life
        /// of the volume.
        pub arbiter_count: u32 = OptionSpec::int("arbiter-count", "0").range(0, 1),
    }
}

/// The settings read on every fop.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub quorum: Quorum,
    pub read_policy: ReadPolicy,
    pub eager_lock: bool,
    pub entry_eager_lock: bool,
    pub post_op_delay: Duration,
    pub lock_with_changelog: bool,
    pub self_heal: bool,
    pub background_heals: usize,
    pub heal_chunk: u64,
    pub heal_window: usize,
    pub diff_heal: bool,
    pub favorite: Policy,
    /// The arbiter child (`arbiter-count 1`: the last one).
    pub arbiter: Option<usize>,
}

impl Config {
    /// The settings of `o` for `children` children.
    pub fn from_options(o: &AfrOptions, children: usize) -> Result<Config, String> {
        let quorum = Quorum::parse(&o.quorum_type, o.quorum_count, children)?;
        let arbiter = match o.arbiter_count {
            0 => None,
            _ if children < 3 => {
                return Err(format!(
                    "arbiter-count 1 needs at least 3 children (replica 3 arbiter 1), got \
                     {children}"
                ));
            }
            _ => Some(children - 1),
        };
        Ok(Config {
            quorum,
            read_policy: ReadPolicy::parse(&o.read_policy)?,
            eager_lock: o.eager_lock,
            entry_eager_lock: o.entry_eager_lock,
            post_op_delay: o.post_op_delay,
            lock_with_changelog: o.lock_with_changelog,
            self_heal: o.self_heal,
            background_heals: o.background_self_heal_count as usize,
            heal_chunk: o.heal_chunk_size,
            heal_window: o.data_self_heal_window_size as usize,
            diff_heal: o.data_self_heal_algorithm == "diff",
            favorite: Policy::parse(&o.favorite_child_policy)?,
            arbiter,
        })
    }
}

/// The pending-counter xattr of each child: the option's list, or `trusted.afr.<name>`.
pub fn pending_keys(o: &AfrOptions, child_names: &[String]) -> Result<Vec<String>, String> {
    if o.pending_xattrs.trim().is_empty() {
        return Ok(child_names
            .iter()
            .map(|n| format!("{}{n}", crate::changelog::PREFIX))
            .collect());
    }
    let keys: Vec<String> = o
        .pending_xattrs
        .split(',')
        .map(|k| k.trim().to_owned())
        .collect();
    if keys.len() != child_names.len() {
        return Err(format!(
            "pending-xattrs names {} xattrs for {} children",
            keys.len(),
            child_names.len()
        ));
    }
    if let Some(bad) = keys
        .iter()
        .find(|k| !k.starts_with(crate::changelog::PREFIX))
    {
        return Err(format!(
            "pending-xattrs: {bad:?} does not start with {:?}",
            crate::changelog::PREFIX
        ));
    }
    Ok(keys)
}
