//! Model-based: random writes, truncates, zerofills and hole punches through stripe and on an
//! in-memory model file; after every step the whole file reads as the model, its size is
//! the model's, and each child holds exactly its coalesced share.

mod common;

use common::*;
use xlator_api::SetAttr;
use xlator_api::abi_stable::std_types::ROption;
use xlfs_stripe::Geometry;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

async fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let n = 1 + rng.below(5) as usize;
    let block = [4096u64, 8192, 12288, 65536][rng.below(4) as usize];
    let geo = Geometry::new(n as u32, block).expect("geometry");
    let (cluster, top) = setup(n, block);
    let f = create(&top, "m", 1).await;
    let mut model: Vec<u8> = Vec::new();
    let limit = block * n as u64 * 4;
    for step in 0..40 {
        let what = rng.below(10);
        let off = rng.below(limit);
        let len = 1 + rng.below(block * 3);
        let ctx =
            format!("seed {seed} n {n} block {block} step {step} op {what} off {off} len {len}");
        match what {
            0..=5 => {
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8 | 1).collect();
                assert_eq!(write(&top, f, off, &data).await, Ok(len), "{ctx}");
                let end = (off + len) as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].copy_from_slice(&data);
            }
            6 | 7 => {
                let attr = SetAttr {
                    size: ROption::RSome(off),
                    ..SetAttr::default()
                };
                let a = if what == 6 {
                    top.fsetattr(&root(), f, attr).await
                } else {
                    top.setattr(&root(), f.gfid, attr).await
                };
                assert_eq!(a.map(|a| a.size), Ok(off), "{ctx}");
                model.resize(off as usize, 0);
            }
            8 => {
                top.zerofill(&root(), f, off, len).await.expect("zerofill");
                let end = (off + len) as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].fill(0);
            }
            _ => {
                top.discard(&root(), f, off, len).await.expect("discard");
                let end = ((off + len) as usize).min(model.len());
                if (off as usize) < end {
                    model[off as usize..end].fill(0);
                }
            }
        }
        assert_eq!(size(&top, f.gfid).await, model.len() as u64, "{ctx}");
        let whole = read(&top, f, 0, model.len() as u32 + 1000)
            .await
            .expect("read");
        assert!(whole == model, "{ctx}: the file differs from the model");
        let (a, b) = (rng.below(limit), rng.below(block * 2) as u32);
        let part = read(&top, f, a, b).await.expect("read part");
        let want =
            &model[(a as usize).min(model.len())..((a + u64::from(b)) as usize).min(model.len())];
        assert!(part == want, "{ctx}: read {a}+{b} differs");
        assert_shares(&cluster, geo, f.gfid, &model).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_writes_truncates_and_holes_match_the_model() {
    for seed in 1..=24 {
        run(seed).await;
    }
}
