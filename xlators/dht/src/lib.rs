#![doc = include_str!("../README.md")]

use std::marker::PhantomData;

use xlator_api::{Init, Subvol, Translator};

/// How a build spells the type: `cluster/distribute`, or its alias `cluster/dht`.
pub trait Spelling: Send + Sync + 'static {
    const TYPE: &'static str;
}

/// `cluster/distribute`.
pub struct Primary;
impl Spelling for Primary {
    const TYPE: &'static str = "cluster/distribute";
}

/// `cluster/dht`, GlusterFS's other name for it.
pub struct DhtAlias;
impl Spelling for DhtAlias {
    const TYPE: &'static str = "cluster/dht";
}

/// cluster/distribute (skeleton: every fop goes to child 0).
pub struct DistributeAs<S: Spelling> {
    children: Vec<Subvol>,
    _spelling: PhantomData<S>,
}

pub type Distribute = DistributeAs<Primary>;
pub type Dht = DistributeAs<DhtAlias>;

impl<S: Spelling> Translator for DistributeAs<S> {
    const TYPE: &'static str = S::TYPE;
    const DOC: &'static str = "Distribute (GlusterFS DHT): skeleton.";
    const MIN_CHILDREN: u32 = 1;
    const MAX_CHILDREN: u32 = 1024;
    type Options = ();

    fn init(init: Init<()>) -> Result<Self, String> {
        Ok(DistributeAs {
            children: init.children,
            _spelling: PhantomData,
        })
    }

    fn children(&self) -> &[Subvol] {
        &self.children
    }
}

xlator_api::export_translators!(Distribute, Dht);
