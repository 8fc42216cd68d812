//! The execution plan of a subgraph, built once at parse time: which nodes reach the result,
//! which are fused into the tiled stage, which run first into whole buffers, and where each
//! step reads its operands (in place, a tile buffer, or a broadcast expansion).

use std::any::Any;
use std::sync::Mutex;

use super::TILE;
use crate::contrib::examplejson::graph::{dim_aligned, Node, NodeKind, Op, MAX_ELEMENTS};
use crate::error::{Error, Result};

/// A tensor available in full before a stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Whole {
    /// Input argument `k`.
    Input(usize),
    /// Whole buffer `j` of the scratch set (a smaller node computed earlier).
    Buffer(usize),
}

/// Where a step reads an operand's tile.
#[derive(Clone, Copy, Debug)]
pub(super) enum Src {
    /// The same element range of a tensor with the stage's layout.
    Whole(Whole),
    /// Expansion buffer `e`, filled at the start of each tile.
    Expanded(usize),
    /// Tile buffer `t`, written by an earlier step of this tile.
    Tile(usize),
}

/// Where a step writes its tile.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dst {
    Tile(usize),
    /// The stage's destination (the output tensor or a whole buffer).
    Stage,
}

#[derive(Debug)]
pub(super) struct Step {
    pub(super) op: Op,
    pub(super) id: u32,
    pub(super) a: Src,
    /// Equal to `a` for unary ops (ignored).
    pub(super) b: Src,
    pub(super) dst: Dst,
}

/// A broadcast operand: element `i` of the stage reads `from` at `sum(coord_d(i) * stride_d)`
/// over `dims` (extent, stride), outermost first. Unit dimensions are dropped and neighbours
/// merged, so `[10, 10] + [10]` becomes `[(10, 0), (10, 1)]` and a scalar `[(n, 0)]`.
#[derive(Debug)]
pub(super) struct Expand {
    pub(super) from: Whole,
    pub(super) dims: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum StageDst {
    Output,
    Buffer(usize),
}

/// Steps run tile by tile over one shape's `len` elements.
#[derive(Debug)]
pub(super) struct Stage {
    pub(super) len: usize,
    pub(super) expands: Vec<Expand>,
    pub(super) steps: Vec<Step>,
    pub(super) dst: StageDst,
}

/// The compiled form of a subgraph plus its pool of scratch sets.
pub(crate) struct Executor {
    pub(super) name: String,
    pub(super) stages: Vec<Stage>,
    pub(super) buffer_lens: Vec<usize>,
    pub(super) tile_slots: usize,
    pub(super) expand_slots: usize,
    pub(super) tile_len: usize,
    pub(super) input_lens: Vec<usize>,
    pub(super) output_len: usize,
    /// Idle scratch sets, each a `Box<Scratch<T>>` for one element type.
    pub(super) pool: Mutex<Vec<Box<dyn Any + Send>>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("stages", &self.stages)
            .finish_non_exhaustive()
    }
}

/// Where a node's value lives during a call.
#[derive(Clone, Copy, Debug)]
enum Home {
    Whole(Whole),
    /// A full node of the fused stage, in tile slot `slot` (or the output for the last node).
    Fused {
        slot: usize,
    },
    /// Not needed for the result.
    Dead,
}

impl Executor {
    /// Plans `nodes` (validated by the parser: operands precede their users, shapes broadcast,
    /// the last node is an op).
    pub(crate) fn new(name: &str, nodes: &[Node]) -> Result<Executor> {
        let last = nodes.len() - 1;
        let mut live = vec![false; nodes.len()];
        live[last] = true;
        for i in (0..=last).rev() {
            if let (true, NodeKind::Compute { operands, .. }) = (live[i], &nodes[i].kind) {
                for &o in operands {
                    live[o] = true;
                }
            }
        }
        let output_len = nodes[last].num_elements();

        // Every live node's shape broadcasts to the result's, so one with as many elements has
        // the result's flat layout and can be fused; a smaller one is a broadcast operand.
        let mut home = vec![Home::Dead; nodes.len()];
        let mut buffer_lens = Vec::new();
        let mut fused = Vec::new();
        let mut input_lens = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            match node.kind {
                NodeKind::Input { arg } => {
                    home[i] = Home::Whole(Whole::Input(arg));
                    input_lens.push(node.num_elements());
                }
                NodeKind::Compute { .. } if !live[i] => {}
                NodeKind::Compute { .. } if node.num_elements() == output_len => {
                    fused.push(i);
                }
                NodeKind::Compute { .. } => {
                    home[i] = Home::Whole(Whole::Buffer(buffer_lens.len()));
                    buffer_lens.push(node.num_elements());
                }
            }
        }
        let scratch_elements: u64 = buffer_lens.iter().map(|&n| n as u64).sum();
        if scratch_elements > MAX_ELEMENTS {
            return Err(Error::value(format!(
                "ExampleJSON subgraph '{name}': its broadcast intermediates need \
                 {scratch_elements} elements, more than the limit 2^31"
            )));
        }

        let mut stages = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Home::Whole(Whole::Buffer(j)) = home[i] {
                let mut stage = Stage::new(node.num_elements(), StageDst::Buffer(j));
                let step = stage.step(nodes, &home, i, Dst::Stage);
                stage.steps.push(step);
                stages.push(stage);
            }
        }

        // The fused stage, with tile slots reused once their value's last reader has run.
        let mut last_use = vec![0usize; nodes.len()];
        for (s, &i) in fused.iter().enumerate() {
            if let NodeKind::Compute { operands, .. } = &nodes[i].kind {
                for &o in operands {
                    last_use[o] = s;
                }
            }
        }
        let mut stage = Stage::new(output_len, StageDst::Output);
        let mut free: Vec<usize> = Vec::new();
        let mut tile_slots = 0;
        for (s, &i) in fused.iter().enumerate() {
            let dst = if i == last {
                Dst::Stage
            } else {
                let slot = free.pop().unwrap_or_else(|| {
                    tile_slots += 1;
                    tile_slots - 1
                });
                Dst::Tile(slot)
            };
            let step = stage.step(nodes, &home, i, dst);
            stage.steps.push(step);
            if let Dst::Tile(slot) = dst {
                home[i] = Home::Fused { slot };
            }
            if let NodeKind::Compute { operands, .. } = &nodes[i].kind {
                for (k, &o) in operands.iter().enumerate() {
                    let repeated = operands[..k].contains(&o);
                    if let (Home::Fused { slot }, false) = (home[o], repeated) {
                        if last_use[o] == s {
                            free.push(slot);
                        }
                    }
                }
            }
        }
        stages.push(stage);

        let expand_slots = stages.iter().map(|s| s.expands.len()).max().unwrap_or(0);
        let longest = stages.iter().map(|s| s.len).max().unwrap_or(1);
        Ok(Executor {
            name: name.to_owned(),
            stages,
            buffer_lens,
            tile_slots,
            expand_slots,
            tile_len: longest.min(TILE),
            input_lens,
            output_len,
            pool: Mutex::new(Vec::new()),
        })
    }
}

impl Stage {
    fn new(len: usize, dst: StageDst) -> Self {
        Stage {
            len,
            expands: Vec::new(),
            steps: Vec::new(),
            dst,
        }
    }

    /// The step computing node `i` of this stage's shape (`nodes[i].shape`).
    fn step(&mut self, nodes: &[Node], home: &[Home], i: usize, dst: Dst) -> Step {
        let NodeKind::Compute { op, operands } = &nodes[i].kind else {
            unreachable!("only op nodes are planned as steps")
        };
        let a = self.operand(nodes, home, operands[0], &nodes[i].shape);
        let b = match operands.get(1) {
            Some(&o) => self.operand(nodes, home, o, &nodes[i].shape),
            None => a,
        };
        Step {
            op: *op,
            id: nodes[i].id,
            a,
            b,
            dst,
        }
    }

    fn operand(&mut self, nodes: &[Node], home: &[Home], o: usize, shape: &[usize]) -> Src {
        match home[o] {
            Home::Fused { slot } => Src::Tile(slot),
            Home::Whole(w) if nodes[o].num_elements() == self.len => Src::Whole(w),
            Home::Whole(w) => {
                let e = match self.expands.iter().position(|x| x.from == w) {
                    Some(e) => e,
                    None => {
                        self.expands.push(Expand {
                            from: w,
                            dims: broadcast_dims(&nodes[o].shape, shape),
                        });
                        self.expands.len() - 1
                    }
                };
                Src::Expanded(e)
            }
            Home::Dead => unreachable!("a live node's operands are live"),
        }
    }
}

/// The (extent, stride) walk of `src` broadcast to `target` (see [`Expand`]).
fn broadcast_dims(src: &[usize], target: &[usize]) -> Vec<(usize, usize)> {
    let rank = target.len();
    let mut strides = vec![0; rank];
    let mut stride = 1;
    for d in (0..rank).rev() {
        let extent = dim_aligned(src, rank, d);
        strides[d] = if extent == 1 { 0 } else { stride };
        stride *= extent;
    }
    let mut dims: Vec<(usize, usize)> = Vec::new();
    for d in 0..rank {
        let (extent, stride) = (target[d], strides[d]);
        if extent == 1 {
            continue;
        }
        match dims.last_mut() {
            // The outer dimension steps exactly over the inner one: one longer dimension.
            Some(outer) if outer.1 == stride * extent => *outer = (outer.0 * extent, stride),
            _ => dims.push((extent, stride)),
        }
    }
    if dims.is_empty() {
        dims.push((1, 0));
    }
    dims
}

#[cfg(test)]
mod tests {
    use crate::contrib::examplejson::exec::test_support::*;

    #[test]
    fn broadcasting_examples() {
        // [2, 3] + [3], then * a [2, 1] column, then - a scalar.
        let text = "f\ninput 0 2 3\ninput 1 3\ninput 2 2 1\ninput 3\n\
                    add 4 inputs: 0 1 shape: 2 3\nmul 5 inputs: 4 2 shape: 2 3\n\
                    sub 6 inputs: 5 3 shape: 2 3\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        let out = call(
            s,
            &[
                vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
                vec![10.0, 20.0, 30.0],
                vec![2.0, -1.0],
                vec![0.5],
            ],
        )
        .unwrap();
        assert_eq!(out, vec![21.5, 43.5, 65.5, -14.5, -25.5, -36.5]);

        // [4, 1] + [1, 3] -> [4, 3] outer sum; a smaller intermediate ([3] = [3] * [3]) feeds
        // the result through broadcasting.
        let text = "f\ninput 0 4 1\ninput 1 1 3\ninput 2 3\n\
                    add 3 inputs: 0 1 shape: 4 3\nmul 4 inputs: 2 2 shape: 3\n\
                    add 5 inputs: 3 4 shape: 4 3\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        let out = call(s, &[vec![0i64, 10, 20, 30], vec![1, 2, 3], vec![1, 2, 3]]).unwrap();
        assert_eq!(out, vec![2, 6, 12, 12, 16, 22, 22, 26, 32, 32, 36, 42]);
    }

    #[test]
    fn broadcasting_across_tiles_matches_reference() {
        // Shapes whose inner runs do not divide the tile, so expansions restart mid-row.
        for (big, small) in [
            ("3000 7", "7"),
            ("7 3000", "7 1"),
            ("5 3 700", "3 1"),
            ("5 3 700", "5 1 700"),
            ("2 4100", "1"),
        ] {
            let text = format!(
                "f\ninput 0 {big}\ninput 1 {small}\nadd 2 inputs: 0 1 shape: {big}\n\
                 relu 3 inputs: 1 shape: {small}\nmul 4 inputs: 2 3 shape: {big}\n\
                 maximum 5 inputs: 4 0 shape: {big}\n"
            );
            let g = Graph::parse(&text).unwrap();
            let s = g.subgraph("f").unwrap();
            let mut rng = Lcg(7);
            let inputs: Vec<Vec<f64>> = (0..2)
                .map(|k| rng.values(s.input_shape(k).unwrap().iter().product()))
                .collect();
            let got = call(s, &inputs).unwrap();
            assert!(
                same_f64(&got, &reference(s, &inputs, float_op)),
                "{big} with {small}"
            );
        }
    }

    /// Builds a random valid subgraph: every shape is the target shape with some leading
    /// dimensions dropped and some set to 1, so any two broadcast together.
    fn random_text(rng: &mut Lcg, ops: &[&str]) -> String {
        let sizes = [1, 2, 3, 5, 16, 33, 130, 257, 1000, 2100, 3001];
        let target = loop {
            let rank = 1 + rng.below(3);
            let t: Vec<usize> = (0..rank).map(|_| sizes[rng.below(sizes.len())]).collect();
            // In u64: 3001^3 overflows a 32-bit usize.
            if t.iter().map(|&d| d as u64).product::<u64>() <= 100_000 {
                break t;
            }
        };
        let mut text = String::from("rnd\n");
        let mut shapes: Vec<Vec<usize>> = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        let mut id = rng.below(3) as u32;
        let fmt = |s: &[usize]| s.iter().map(|d| format!(" {d}")).collect::<String>();
        for _ in 0..1 + rng.below(4) {
            let drop = rng.below(target.len());
            let shape: Vec<usize> = target[drop..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect();
            text += &format!("input {id}{}\n", fmt(&shape));
            shapes.push(shape);
            ids.push(id);
            id += 1 + rng.below(2) as u32;
        }
        for _ in 0..1 + rng.below(9) {
            let op = ops[rng.below(ops.len())];
            let a = rng.below(shapes.len());
            let b = rng.below(shapes.len());
            let (shape, operands) = if op == "relu" {
                (shapes[a].clone(), format!("{}", ids[a]))
            } else {
                (
                    broadcast_shapes(&shapes[a], &shapes[b]).unwrap(),
                    format!("{} {}", ids[a], ids[b]),
                )
            };
            text += &format!("{op} {id} inputs: {operands} shape:{}\n", fmt(&shape));
            shapes.push(shape);
            ids.push(id);
            id += 1 + rng.below(2) as u32;
        }
        text
    }

    #[test]
    fn random_graphs_match_reference() {
        let mut rng = Lcg(12345);
        let all = ["add", "sub", "mul", "div", "maximum", "minimum", "relu"];
        let no_div = ["add", "sub", "mul", "maximum", "minimum", "relu"];
        for round in 0..250 {
            let text = random_text(&mut rng, &all);
            let g = Graph::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let s = g.subgraph("rnd").unwrap();
            for _ in 0..2 {
                let inputs: Vec<Vec<f64>> = (0..s.num_inputs())
                    .map(|k| rng.values(s.input_shape(k).unwrap().iter().product()))
                    .collect();
                let got = call(s, &inputs).unwrap();
                let want = reference(s, &inputs, float_op);
                assert!(same_f64(&got, &want), "round {round}:\n{text}");
            }
            let text = random_text(&mut rng, &no_div);
            let g = Graph::parse(&text).unwrap();
            let s = g.subgraph("rnd").unwrap();
            let inputs: Vec<Vec<i64>> = (0..s.num_inputs())
                .map(|k| {
                    let n = s.input_shape(k).unwrap().iter().product();
                    (0..n).map(|_| rng.below(2001) as i64 - 1000).collect()
                })
                .collect();
            let got = call(s, &inputs).unwrap();
            assert_eq!(got, reference(s, &inputs, int_op), "round {round}:\n{text}");
        }
    }

    #[test]
    fn long_chain_reuses_tile_slots() {
        // 12 fused nodes, node k reading k - 1 and k / 2: the 11 that live in tiles share 5 slots
        // (at most 4 values are alive while a fifth is written, e.g. 3, 4, 5 while 6 is).
        let mut text = String::from("f\ninput 0 3000\ninput 1 3000\n");
        for id in 2..14 {
            let (a, b) = (id - 1, id / 2);
            let op = ["add", "sub", "mul", "maximum"][id % 4];
            text += &format!("{op} {id} inputs: {a} {b} shape: 3000\n");
        }
        let g = Graph::parse(&text).unwrap();
        let s = g.subgraph("f").unwrap();
        assert_eq!(s.exec.tile_slots, 5);
        let mut rng = Lcg(3);
        let inputs = vec![rng.values(3000), rng.values(3000)];
        let got = call(s, &inputs).unwrap();
        assert!(same_f64(&got, &reference(s, &inputs, float_op)));
    }

    #[test]
    fn several_subgraphs_in_one_text() {
        let text = "json_rt_0\ninput 0 10 10\ninput 1 10 10\ninput 2 10 10\ninput 3 10 10\n\
                    add 4 inputs: 0 1 shape: 10 10\nsub 5 inputs: 4 2 shape: 10 10\n\
                    mul 6 inputs: 5 3 shape: 10 10\n\
                    json_rt_1\ninput 0 4\ninput 1 4\nminimum 2 inputs: 0 1 shape: 4\n\
                    relu 3 inputs: 2 shape: 4\n";
        let g = Graph::parse(text).unwrap();
        let s0 = g.subgraph("json_rt_0").unwrap();
        let s1 = g.subgraph("json_rt_1").unwrap();
        let ones = vec![1.0f32; 100];
        let twos = vec![2.0f32; 100];
        let out = call(
            s0,
            &[twos.clone(), twos.clone(), ones.clone(), twos.clone()],
        )
        .unwrap();
        assert_eq!(out, vec![6.0; 100]);
        let out = call(
            s1,
            &[vec![-1.0f32, 5.0, 3.0, 0.0], vec![2.0, 4.0, -8.0, 1.0]],
        )
        .unwrap();
        assert_eq!(out, vec![0.0, 4.0, 0.0, 0.0]);
    }

    #[test]
    fn dead_nodes_are_skipped() {
        // Node 3 would divide by zero but does not reach the result.
        let text = "f\ninput 0 2\ninput 1 2\nadd 2 inputs: 0 1 shape: 2\n\
                    div 3 inputs: 0 1 shape: 2\nmul 4 inputs: 2 2 shape: 2\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        assert_eq!(call(s, &[vec![1i32, 2], vec![0, 0]]).unwrap(), vec![1, 4]);
    }
}
