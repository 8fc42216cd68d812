//! Running a plan: the scratch set of one call (taken from and given back to the subgraph's
//! pool, whose lock is never held while computing) and the tile loop of one stage.

use std::sync::PoisonError;

use super::kernels::{apply, expand, Element};
use super::plan::{Dst, Executor, Src, Stage, StageDst, Whole};
use super::TILE;
use crate::error::{Error, Result};

/// Scratch sets kept per subgraph; more concurrent callers allocate sets that are then dropped.
const POOL_MAX: usize = 16;

impl Executor {
    /// Runs the plan. The caller has checked the argument count and lengths.
    pub(super) fn run<T: Element>(&self, inputs: &[&[T]], output: &mut [T]) -> Result<()> {
        let mut scratch = self.take::<T>();
        let result = self.run_with(&mut scratch, inputs, output);
        self.give(scratch);
        result
    }

    fn run_with<T: Element>(
        &self,
        scratch: &mut Scratch<T>,
        inputs: &[&[T]],
        output: &mut [T],
    ) -> Result<()> {
        let Scratch {
            buffers,
            tiles,
            expanded,
        } = scratch;
        for stage in &self.stages {
            let result = match stage.dst {
                StageDst::Output => run_stage(stage, inputs, buffers, tiles, expanded, output),
                StageDst::Buffer(j) => {
                    // Moved out and back so the stage can read the other buffers meanwhile;
                    // a stage never reads its own destination.
                    let mut dst = std::mem::take(&mut buffers[j]);
                    let r = run_stage(stage, inputs, buffers, tiles, expanded, &mut dst);
                    buffers[j] = dst;
                    r
                }
            };
            if let Err(id) = result {
                return Err(Error::value(format!(
                    "ExampleJSON subgraph '{}': node {id} (div): integer division by zero",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// A scratch set for `T`: an idle one from the pool, or a new one.
    fn take<T: Element>(&self) -> Box<Scratch<T>> {
        let idle = {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            let at = pool.iter().rposition(|s| s.is::<Scratch<T>>());
            at.map(|i| pool.swap_remove(i))
        };
        match idle.map(|s| s.downcast::<Scratch<T>>()) {
            Some(Ok(set)) => set,
            _ => Box::new(Scratch::new(self)),
        }
    }

    fn give<T: Element>(&self, set: Box<Scratch<T>>) {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.len() < POOL_MAX {
            pool.push(set);
        }
    }
}

/// One call's buffers.
struct Scratch<T> {
    /// Whole results of the smaller (broadcast) nodes.
    buffers: Vec<Vec<T>>,
    /// Tile results of the fused nodes.
    tiles: Vec<Vec<T>>,
    /// Tiles of broadcast operands.
    expanded: Vec<Vec<T>>,
}

impl<T: Element> Scratch<T> {
    fn new(exec: &Executor) -> Self {
        let tile = |_| vec![T::default(); exec.tile_len];
        Scratch {
            buffers: exec
                .buffer_lens
                .iter()
                .map(|&n| vec![T::default(); n])
                .collect(),
            tiles: (0..exec.tile_slots).map(tile).collect(),
            expanded: (0..exec.expand_slots).map(tile).collect(),
        }
    }
}

/// Runs `stage` into `dst`; on an integer division by zero returns the node id.
fn run_stage<T: Element>(
    stage: &Stage,
    inputs: &[&[T]],
    buffers: &[Vec<T>],
    tiles: &mut [Vec<T>],
    expanded: &mut [Vec<T>],
    dst: &mut [T],
) -> std::result::Result<(), u32> {
    let whole = |w: Whole| -> &[T] {
        match w {
            Whole::Input(k) => inputs[k],
            Whole::Buffer(j) => &buffers[j],
        }
    };
    let mut start = 0;
    while start < stage.len {
        let len = TILE.min(stage.len - start);
        for (e, buf) in stage.expands.iter().zip(expanded.iter_mut()) {
            expand(whole(e.from), &e.dims, start, &mut buf[..len]);
        }
        let expanded: &[Vec<T>] = expanded;
        for step in &stage.steps {
            let ok = match step.dst {
                Dst::Stage => {
                    let tiles: &[Vec<T>] = tiles;
                    let src = |s: Src| -> &[T] {
                        match s {
                            Src::Whole(w) => &whole(w)[start..start + len],
                            Src::Expanded(e) => &expanded[e][..len],
                            Src::Tile(t) => &tiles[t][..len],
                        }
                    };
                    apply(
                        step.op,
                        &mut dst[start..start + len],
                        src(step.a),
                        src(step.b),
                    )
                }
                Dst::Tile(t) => {
                    // Moved out and back: operands are other slots (planned so), read meanwhile.
                    let mut out = std::mem::take(&mut tiles[t]);
                    let tiles_ro: &[Vec<T>] = tiles;
                    let src = |s: Src| -> &[T] {
                        match s {
                            Src::Whole(w) => &whole(w)[start..start + len],
                            Src::Expanded(e) => &expanded[e][..len],
                            Src::Tile(t) => &tiles_ro[t][..len],
                        }
                    };
                    let ok = apply(step.op, &mut out[..len], src(step.a), src(step.b));
                    tiles[t] = out;
                    ok
                }
            };
            if !ok {
                return Err(step.id);
            }
        }
        start += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::contrib::examplejson::exec::test_support::*;

    #[test]
    fn repeated_calls_reuse_one_scratch_set() {
        // Broadcast intermediates and fused tiles both carry over between calls.
        let text = "f\ninput 0 50 70\ninput 1 70\nmul 2 inputs: 1 1 shape: 70\n\
                    add 3 inputs: 0 2 shape: 50 70\nsub 4 inputs: 3 0 shape: 50 70\n\
                    mul 5 inputs: 4 3 shape: 50 70\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        let mut rng = Lcg(99);
        for _ in 0..5 {
            let inputs = vec![rng.values(3500), rng.values(70)];
            let got = call(s, &inputs).unwrap();
            assert!(same_f64(&got, &reference(s, &inputs, float_op)));
            assert_eq!(s.exec.pool.lock().unwrap().len(), 1);
        }
        // Another dtype gets its own set; both stay pooled.
        let got = call(s, &[vec![1i32; 3500], vec![2; 70]]).unwrap();
        assert_eq!(got, vec![(1 + 4 - 1) * (1 + 4); 3500]);
        assert_eq!(s.exec.pool.lock().unwrap().len(), 2);
    }

    #[test]
    fn four_threads_share_one_subgraph() {
        let text = "f\ninput 0 64 100\ninput 1 100\ninput 2 64 1\n\
                    add 3 inputs: 0 1 shape: 64 100\nmul 4 inputs: 3 2 shape: 64 100\n\
                    relu 5 inputs: 1 shape: 100\nsub 6 inputs: 4 5 shape: 64 100\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                scope.spawn(move || {
                    let mut rng = Lcg(1000 + t);
                    for _ in 0..40 {
                        let inputs = vec![rng.values(6400), rng.values(100), rng.values(64)];
                        let got = call(s, &inputs).unwrap();
                        assert!(same_f64(&got, &reference(s, &inputs, float_op)));
                    }
                });
            }
        });
        let pooled = s.exec.pool.lock().unwrap().len();
        assert!((1..=4).contains(&pooled), "pooled sets: {pooled}");
    }
}
