//! Hop-cost benchmark.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use xlator_api::{Ctx, Errno, Gfid, Iatt, Init, InitArgs, Subvol, Translator};
use xlfs_core::registry::Registry;
use xlfs_core::services::host_services;

/// A leaf that answers `stat` at once.
struct NullLeaf;

impl Translator for NullLeaf {
    const TYPE: &'static str = "bench/null";
    const MIN_CHILDREN: u32 = 0;
    type Options = ();
    fn init(_: Init<()>) -> Result<Self, String> {
        Ok(NullLeaf)
    }
    fn children(&self) -> &[Subvol] {
        &[]
    }
    async fn stat(&self, _cx: &Ctx, gfid: Gfid) -> Result<Iatt, Errno> {
        Ok(Iatt {
            gfid,
            ..Iatt::default()
        })
    }
}

/// The direct (no ABI) equivalent: a trait with a boxed future behind `Arc<dyn>`.
trait DynStat: Send + Sync {
    fn stat(&self, gfid: Gfid) -> Pin<Box<dyn Future<Output = Result<Iatt, Errno>> + Send + '_>>;
}
struct DynLeaf;
impl DynStat for DynLeaf {
    fn stat(&self, gfid: Gfid) -> Pin<Box<dyn Future<Output = Result<Iatt, Errno>> + Send + '_>> {
        Box::pin(async move {
            Ok(Iatt {
                gfid,
                ..Iatt::default()
            })
        })
    }
}
struct DynPass(Arc<dyn DynStat>);
impl DynStat for DynPass {
    fn stat(&self, gfid: Gfid) -> Pin<Box<dyn Future<Output = Result<Iatt, Errno>> + Send + '_>> {
        Box::pin(self.0.stat(gfid))
    }
}

/// Static dispatch, fully inlinable.
trait StaticStat {
    fn stat(&self, gfid: Gfid) -> impl Future<Output = Result<Iatt, Errno>> + Send;
}
struct StaticLeaf;
impl StaticStat for StaticLeaf {
    async fn stat(&self, gfid: Gfid) -> Result<Iatt, Errno> {
        Ok(Iatt {
            gfid,
            ..Iatt::default()
        })
    }
}
struct StaticPass<T>(T);
impl<T: StaticStat + Sync> StaticStat for StaticPass<T> {
    async fn stat(&self, gfid: Gfid) -> Result<Iatt, Errno> {
        self.0.stat(gfid).await
    }
}

fn ns_per_call(calls: u64, start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64 / calls as f64
}

async fn time_subvol(top: &Subvol, calls: u64) -> f64 {
    let cx = Ctx::root();
    for _ in 0..calls / 10 {
        let _ = black_box(top.stat(&cx, Gfid::ROOT).await);
    }
    let start = Instant::now();
    for _ in 0..calls {
        let _ = black_box(top.stat(&cx, Gfid::ROOT).await);
    }
    ns_per_call(calls, start)
}

async fn time_dyn(top: &Arc<dyn DynStat>, calls: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        let _ = black_box(top.stat(Gfid::ROOT).await);
    }
    ns_per_call(calls, start)
}

fn stack(
    leaf: &Subvol,
    hops: usize,
    make: &dyn Fn(Subvol) -> Result<Subvol, String>,
) -> Result<Subvol, String> {
    let mut top = leaf.clone();
    for _ in 0..hops {
        top = make(top)?;
    }
    Ok(top)
}

pub fn run(calls: u64) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let registry = Registry::with_search_path(Registry::default_search_path(), false);
        let template = registry
            .resolve("example/template")
            .map_err(|e| e.to_string())?;
        let lib = template
            .library
            .clone()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let module = template.module;
        let args = |children: Vec<Subvol>| InitArgs {
            name: "hop".into(),
            options: xlator_api::Options::new(),
            children: children.into_iter().collect(),
            services: host_services(),
        };
        let leaf = xlator_api::sdk::instantiate::<NullLeaf>(args(vec![]))?;
        let make_so = |child: Subvol| -> Result<Subvol, String> {
            (module.new_xlator())("example/template".into(), args(vec![child]))
                .into_result()
                .map_err(String::from)
        };

        println!("fop: stat, {calls} sequential awaited calls per row, one tokio worker");
        println!("pass-through translator: example/template loaded from {lib}\n");
        let s0 = {
            let top = StaticLeaf;
            let start = Instant::now();
            for _ in 0..calls {
                let _ = black_box(top.stat(Gfid::ROOT).await);
            }
            ns_per_call(calls, start)
        };
        let s8 = {
            let top = StaticPass(StaticPass(StaticPass(StaticPass(StaticPass(StaticPass(
                StaticPass(StaticPass(StaticLeaf)),
            ))))));
            let start = Instant::now();
            for _ in 0..calls {
                let _ = black_box(top.stat(Gfid::ROOT).await);
            }
            ns_per_call(calls, start)
        };
        let mut dyn_top: Arc<dyn DynStat> = Arc::new(DynLeaf);
        let d0 = time_dyn(&dyn_top, calls).await;
        for _ in 0..8 {
            dyn_top = Arc::new(DynPass(dyn_top));
        }
        let d8 = time_dyn(&dyn_top, calls).await;

        println!(
            "{:<44} {:>10} {:>10} {:>12}",
            "path", "0 hops", "8 hops", "per hop"
        );
        let row = |name: &str, a: f64, b: f64| {
            println!("{name:<44} {a:>8.1}ns {b:>8.1}ns {:>10.1}ns", (b - a) / 8.0);
        };
        row("direct generic async fn (static dispatch)", s0, s8);
        row("direct Arc<dyn Trait> + boxed future", d0, d8);
        let mut abi = Vec::new();
        for hops in [0usize, 1, 2, 4, 8] {
            let top = stack(&leaf, hops, &make_so)?;
            abi.push((hops, time_subvol(&top, calls).await));
        }
        let a0 = abi[0].1;
        let a8 = abi[abi.len() - 1].1;
        row("xlfs ABI: Subvol -> FfiFuture, .so pass-through", a0, a8);
        println!();
        for (hops, ns) in &abi {
            println!("  xlfs ABI, {hops} .so hop(s) over the leaf: {ns:>8.1} ns/fop");
        }
        Ok(())
    })
}
