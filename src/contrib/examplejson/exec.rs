//! Running ExampleJSON subgraphs: an execution plan built once at parse time, elementwise
//! kernels, and the DLTensor entry point.
//!
//! TVM's reference runtime (example_ext_runtime.cc) copies every argument into a per-node
//! NDArray, runs each node over whole tensors through the packed-function calling convention and
//! copies the last node out; it supports float32 only and one caller at a time. Here:
//! - Nodes that do not reach the result are skipped (they have no observable effect).
//! - Nodes with as many elements as the result ("full" nodes) are fused: the runner walks the
//!   result in tiles of [`TILE`] elements and runs every full node on the tile, so intermediates
//!   live in cache-sized tile buffers, each input is read once in place (no copy) and the last
//!   node writes straight into the output tensor.
//! - Smaller nodes, which can only feed later nodes through broadcasting (a `[10]` vector into a
//!   `[10, 10]` add), run first, each into a whole buffer.
//! - A broadcast operand is expanded tile by tile into a tile buffer, so every kernel is a loop
//!   over zipped slices of equal length that the compiler vectorizes.
//! - The buffers of one call form a scratch set, allocated on first use. A subgraph keeps a pool
//!   of sets: a call takes one and gives it back afterwards; the pool's lock is held only for
//!   that pop and push, never while computing, so threads can run one subgraph concurrently.
//!
//! Integer `add`/`sub`/`mul` wrap on overflow (two's complement), where the C kernels of TVM's
//! guide would hit undefined behaviour; integer `div` truncates toward zero like C, a division by
//! zero is an error (checked per tile before dividing) and `MIN / -1` wraps to `MIN`.

use std::any::Any;
use std::sync::{Mutex, PoisonError};

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDeviceType, DLTensor};

use super::graph::{dim_aligned, Node, NodeKind, Op, Subgraph, MAX_ELEMENTS, MAX_RANK};
use crate::error::{Error, Result};
use crate::tensor::layout;

/// Elements per tile of a fused stage. Small, so that every input stream of the stage advances
/// nearly in lockstep, as in a hand-fused loop: with 2048-element tiles each step streams 8 KiB
/// of one or two inputs at a time and the 4-node, 16M-element float32 benchmark
/// (benches/examplejson_bench.rs) reached about 65% of the fused loop's bandwidth; 128 gives
/// about 80% (thread CPU time, 2-core x86-64), while 32 loses to the per-step dispatch.
pub const TILE: usize = 128;

/// Scratch sets kept per subgraph; more concurrent callers allocate sets that are then dropped.
const POOL_MAX: usize = 16;

/// An element type the kernels support: `f32`, `f64`, `i32`, `i64` (sealed).
pub trait Element:
    Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static + private::Sealed
{
    /// DLPack type code.
    const CODE: DLDataTypeCode;
    /// Bits per element.
    const BITS: u8;
    /// `a + b`, wrapping for integers.
    fn add(a: Self, b: Self) -> Self;
    /// `a - b`, wrapping for integers.
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b`, wrapping for integers.
    fn mul(a: Self, b: Self) -> Self;
    /// `dst[i] = a[i] / b[i]`; returns false, writing nothing, on an integer division by zero.
    fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool;
}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

macro_rules! float_element {
    ($t:ty, $bits:expr) => {
        impl Element for $t {
            const CODE: DLDataTypeCode = DLDataTypeCode::FLOAT;
            const BITS: u8 = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool {
                zip2(dst, a, b, |x, y| x / y);
                true
            }
        }
    };
}

macro_rules! int_element {
    ($t:ty, $bits:expr) => {
        impl Element for $t {
            const CODE: DLDataTypeCode = DLDataTypeCode::INT;
            const BITS: u8 = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            fn div_into(dst: &mut [Self], a: &[Self], b: &[Self]) -> bool {
                if b[..dst.len()].contains(&0) {
                    return false;
                }
                zip2(dst, a, b, |x, y| x.wrapping_div(y));
                true
            }
        }
    };
}

float_element!(f32, 32);
float_element!(f64, 64);
int_element!(i32, 32);
int_element!(i64, 64);

/// `dst[i] = f(a[i], b[i])`; the operands are cut to `dst`'s length first so the loop has no
/// bounds checks and vectorizes.
#[inline(always)]
fn zip2<T: Copy>(dst: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    let n = dst.len();
    for ((d, &x), &y) in dst.iter_mut().zip(&a[..n]).zip(&b[..n]) {
        *d = f(x, y);
    }
}

/// `dst[i] = f(a[i])`.
#[inline(always)]
fn zip1<T: Copy>(dst: &mut [T], a: &[T], f: impl Fn(T) -> T) {
    let n = dst.len();
    for (d, &x) in dst.iter_mut().zip(&a[..n]) {
        *d = f(x);
    }
}

/// Runs one op on equal-length slices; false on an integer division by zero.
fn apply<T: Element>(op: Op, dst: &mut [T], a: &[T], b: &[T]) -> bool {
    match op {
        Op::Add => zip2(dst, a, b, T::add),
        Op::Sub => zip2(dst, a, b, T::sub),
        Op::Mul => zip2(dst, a, b, T::mul),
        Op::Div => return T::div_into(dst, a, b),
        // Selects, as TVM's LLVM codegen lowers max/min (codegen_llvm.cc); they vectorize to
        // max/min instructions.
        Op::Maximum => zip2(dst, a, b, |x, y| if x > y { x } else { y }),
        Op::Minimum => zip2(dst, a, b, |x, y| if x < y { x } else { y }),
        Op::Relu => {
            let zero = T::default();
            zip1(dst, a, |x| if x > zero { x } else { zero })
        }
    }
    true
}

/// A tensor available in full before a stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Whole {
    /// Input argument `k`.
    Input(usize),
    /// Whole buffer `j` of the scratch set (a smaller node computed earlier).
    Buffer(usize),
}

/// Where a step reads an operand's tile.
#[derive(Clone, Copy, Debug)]
enum Src {
    /// The same element range of a tensor with the stage's layout.
    Whole(Whole),
    /// Expansion buffer `e`, filled at the start of each tile.
    Expanded(usize),
    /// Tile buffer `t`, written by an earlier step of this tile.
    Tile(usize),
}

/// Where a step writes its tile.
#[derive(Clone, Copy, Debug)]
enum Dst {
    Tile(usize),
    /// The stage's destination (the output tensor or a whole buffer).
    Stage,
}

#[derive(Debug)]
struct Step {
    op: Op,
    id: u32,
    a: Src,
    /// Equal to `a` for unary ops (ignored).
    b: Src,
    dst: Dst,
}

/// A broadcast operand: element `i` of the stage reads `from` at `sum(coord_d(i) * stride_d)`
/// over `dims` (extent, stride), outermost first. Unit dimensions are dropped and neighbours
/// merged, so `[10, 10] + [10]` becomes `[(10, 0), (10, 1)]` and a scalar `[(n, 0)]`.
#[derive(Debug)]
struct Expand {
    from: Whole,
    dims: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug)]
enum StageDst {
    Output,
    Buffer(usize),
}

/// Steps run tile by tile over one shape's `len` elements.
#[derive(Debug)]
struct Stage {
    len: usize,
    expands: Vec<Expand>,
    steps: Vec<Step>,
    dst: StageDst,
}

/// The compiled form of a subgraph plus its pool of scratch sets.
pub(crate) struct Executor {
    name: String,
    stages: Vec<Stage>,
    buffer_lens: Vec<usize>,
    tile_slots: usize,
    expand_slots: usize,
    tile_len: usize,
    input_lens: Vec<usize>,
    output_len: usize,
    /// Idle scratch sets, each a `Box<Scratch<T>>` for one element type.
    pool: Mutex<Vec<Box<dyn Any + Send>>>,
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

    /// Runs the plan. The caller has checked the argument count and lengths.
    fn run<T: Element>(&self, inputs: &[&[T]], output: &mut [T]) -> Result<()> {
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

/// Writes elements `start..start + out.len()` of `src` broadcast along `dims` into `out`.
fn expand<T: Copy>(src: &[T], dims: &[(usize, usize)], start: usize, out: &mut [T]) {
    let k = dims.len();
    let mut coord = [0usize; MAX_RANK];
    let mut rest = start;
    let mut offset = 0;
    for d in (0..k).rev() {
        let (extent, stride) = dims[d];
        coord[d] = rest % extent;
        rest /= extent;
        offset += coord[d] * stride;
    }
    let (inner, inner_stride) = dims[k - 1];
    let mut done = 0;
    while done < out.len() {
        let run = (inner - coord[k - 1]).min(out.len() - done);
        let piece = &mut out[done..done + run];
        match inner_stride {
            0 => piece.fill(src[offset]),
            1 => piece.copy_from_slice(&src[offset..offset + run]),
            s => {
                for (j, x) in piece.iter_mut().enumerate() {
                    *x = src[offset + j * s];
                }
            }
        }
        done += run;
        coord[k - 1] += run;
        offset += run * inner_stride;
        if coord[k - 1] == inner {
            coord[k - 1] = 0;
            offset -= inner * inner_stride;
            for d in (0..k - 1).rev() {
                let (extent, stride) = dims[d];
                coord[d] += 1;
                offset += stride;
                if coord[d] < extent {
                    break;
                }
                coord[d] = 0;
                offset -= extent * stride;
            }
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

/// A checked argument: `len` elements at `ptr`.
#[derive(Clone, Copy)]
struct RawView {
    ptr: *mut u8,
    len: usize,
}

impl RawView {
    fn overlaps(&self, other: &RawView, elem: usize) -> bool {
        let (a, b) = (self.ptr as usize, other.ptr as usize);
        a < b + other.len * elem && b < a + self.len * elem
    }
}

impl Subgraph {
    /// Runs the subgraph on Rust slices: `inputs` in declaration order, each with exactly its
    /// declared number of elements (row-major), and `output` with the result's.
    pub fn run_slices<T: Element>(&self, inputs: &[&[T]], output: &mut [T]) -> Result<()> {
        let exec = &self.exec;
        if inputs.len() != exec.input_lens.len() {
            crate::bail_value!(
                "ExampleJSON subgraph '{}' takes {} inputs, got {}",
                self.name,
                exec.input_lens.len(),
                inputs.len()
            );
        }
        for (k, (x, &want)) in inputs.iter().zip(&exec.input_lens).enumerate() {
            if x.len() != want {
                crate::bail_value!(
                    "ExampleJSON subgraph '{}': input {k} has {} elements, expected {want} \
                     (shape {:?})",
                    self.name,
                    x.len(),
                    self.nodes[self.inputs[k]].shape
                );
            }
        }
        if output.len() != exec.output_len {
            crate::bail_value!(
                "ExampleJSON subgraph '{}': the output has {} elements, expected {} (shape {:?})",
                self.name,
                output.len(),
                exec.output_len,
                self.output_shape()
            );
        }
        exec.run(inputs, output)
    }

    /// Runs the subgraph on DLTensors: its inputs in declaration order, then the output, which
    /// receives the last node. Checks the argument count, the device (CPU only), the dtype
    /// (float32, float64, int32 or int64, the same for all), the shapes against the declared
    /// ones, contiguity, null and misaligned data pointers. Inputs may alias each other and the
    /// output (the result is then computed aside and copied in).
    ///
    /// # Safety
    /// For every argument: `shape` points to `ndim` readable `i64`s (when `ndim` is at most
    /// [`MAX_RANK`]), `strides` is null or likewise, and once the checks pass,
    /// `data + byte_offset` points to the whole tensor (elements × element size bytes), readable
    /// and, for the output, writable; while the call runs no other thread writes the arguments'
    /// memory or accesses the output's.
    pub unsafe fn run(&self, args: &[&DLTensor]) -> Result<()> {
        let name = &self.name;
        let n = self.inputs.len();
        if args.len() != n + 1 {
            crate::bail_value!(
                "ExampleJSON subgraph '{name}' takes {} arguments ({n} inputs, then the output), \
                 got {}",
                n + 1,
                args.len()
            );
        }
        for (i, t) in args.iter().enumerate() {
            if t.device.device_type != DLDeviceType::CPU {
                crate::bail_value!(
                    "ExampleJSON subgraph '{name}': argument {i} is on device {}, but this \
                     runtime runs on cpu only",
                    layout::device_name(t.device)
                );
            }
            if Dtype::of(t.dtype).is_none() {
                crate::bail_type!(
                    "ExampleJSON subgraph '{name}': argument {i} has dtype {}, supported are \
                     float32, float64, int32 and int64",
                    layout::dtype_label(t.dtype)
                );
            }
            if t.dtype != args[0].dtype {
                crate::bail_type!(
                    "ExampleJSON subgraph '{name}': argument {i} has dtype {} but argument 0 has \
                     {}; all arguments must have the same dtype",
                    layout::dtype_label(t.dtype),
                    layout::dtype_label(args[0].dtype)
                );
            }
        }
        // Checked in the loop above; kept as an error rather than a panic.
        let dtype = Dtype::of(args[0].dtype).ok_or_else(|| {
            Error::type_error(format!(
                "ExampleJSON subgraph '{name}': unsupported dtype {}",
                layout::dtype_label(args[0].dtype)
            ))
        })?;
        let elem = dtype.size();
        let mut views = Vec::with_capacity(args.len());
        for (i, t) in args.iter().enumerate() {
            let expected = if i < n {
                &self.nodes[self.inputs[i]].shape
            } else {
                self.output_shape()
            };
            // SAFETY: the caller guarantees `shape`/`strides` hold `ndim` values.
            views.push(unsafe { check_tensor(name, i, t, expected, elem)? });
        }
        // SAFETY: the views passed every check; the caller guarantees the memory behind them.
        unsafe {
            match dtype {
                Dtype::F32 => self.run_views::<f32>(&views),
                Dtype::F64 => self.run_views::<f64>(&views),
                Dtype::I32 => self.run_views::<i32>(&views),
                Dtype::I64 => self.run_views::<i64>(&views),
            }
        }
    }

    /// # Safety
    /// `views` are checked arguments of element type `T` (see [`Subgraph::run`]).
    unsafe fn run_views<T: Element>(&self, views: &[RawView]) -> Result<()> {
        let Some((out, ins)) = views.split_last() else {
            return Ok(());
        };
        let elem = std::mem::size_of::<T>();
        let aliased = ins.iter().any(|v| v.overlaps(out, elem));
        let inputs: Vec<&[T]> = ins
            .iter()
            // SAFETY: checked non-null, aligned for T, `len` elements readable (caller).
            .map(|v| unsafe { std::slice::from_raw_parts(v.ptr.cast::<T>(), v.len) })
            .collect();
        if !aliased {
            // SAFETY: as above, writable, and no input slice overlaps it.
            let output = unsafe { std::slice::from_raw_parts_mut(out.ptr.cast::<T>(), out.len) };
            return self.exec.run(&inputs, output);
        }
        // The output shares memory with an input: compute aside, then copy once the input
        // slices are gone, so no shared and mutable borrow of the same bytes coexist.
        let mut result = vec![T::default(); out.len];
        self.exec.run(&inputs, &mut result)?;
        drop(inputs);
        // SAFETY: as above; no other slice of these bytes is alive now.
        let output = unsafe { std::slice::from_raw_parts_mut(out.ptr.cast::<T>(), out.len) };
        output.copy_from_slice(&result);
        Ok(())
    }
}

/// Checks one argument's shape, strides and data pointer.
///
/// # Safety
/// `t.shape` and (if non-null) `t.strides` hold `t.ndim` values when `0 <= ndim <= MAX_RANK`.
unsafe fn check_tensor(
    name: &str,
    i: usize,
    t: &DLTensor,
    expected: &[usize],
    elem: usize,
) -> Result<RawView> {
    let ndim = usize::try_from(t.ndim).ok().filter(|&d| d <= MAX_RANK);
    let shape: Option<&[i64]> = match ndim {
        Some(0) => Some(&[]),
        Some(d) if !t.shape.is_null() => {
            // SAFETY: the caller guarantees `shape` holds `ndim` values.
            Some(unsafe { std::slice::from_raw_parts(t.shape, d) })
        }
        _ => None,
    };
    let matches = shape.is_some_and(|s| {
        s.len() == expected.len() && s.iter().zip(expected).all(|(&g, &e)| g == e as i64)
    });
    if !matches {
        let got = match shape {
            Some(s) => format!("shape {s:?}"),
            None if t.shape.is_null() => format!("ndim {} and a null shape pointer", t.ndim),
            None => format!("ndim {}", t.ndim),
        };
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} has {got}, expected shape {expected:?}"
        );
    }
    // The shape matched `expected`, so it is present.
    let shape = shape.unwrap_or_default();
    // SAFETY: the caller guarantees `strides`, when non-null, holds `ndim` values.
    if let Some(strides) = unsafe { layout::dl_strides(t) } {
        if !layout::is_contiguous(shape, Some(strides)) {
            crate::bail_value!(
                "ExampleJSON subgraph '{name}': argument {i} is not contiguous (strides \
                 {strides:?} for shape {expected:?}); pass a compact row-major tensor"
            );
        }
    }
    if t.data.is_null() {
        crate::bail_value!("ExampleJSON subgraph '{name}': argument {i} has a null data pointer");
    }
    let len: usize = expected.iter().product();
    // At most 2^31 elements of at most 8 bytes: no overflow.
    let bytes = len * elem;
    let offset = usize::try_from(t.byte_offset).ok();
    let end = offset
        .and_then(|o| (t.data as usize).checked_add(o))
        .and_then(|start| start.checked_add(bytes));
    let Some(offset) = offset.filter(|_| end.is_some()) else {
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} has a byte_offset {} that overflows the \
             address space",
            t.byte_offset
        );
    };
    let ptr = t.data.cast::<u8>().wrapping_add(offset);
    if (ptr as usize) & (elem - 1) != 0 {
        crate::bail_value!(
            "ExampleJSON subgraph '{name}': argument {i} data pointer {ptr:p} (with byte_offset) \
             is not aligned to its {elem}-byte elements"
        );
    }
    Ok(RawView { ptr, len })
}

/// The supported dtypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F32,
    F64,
    I32,
    I64,
}

impl Dtype {
    fn of(dtype: DLDataType) -> Option<Dtype> {
        match (dtype.code, dtype.bits, dtype.lanes) {
            (DLDataTypeCode::FLOAT, 32, 1) => Some(Dtype::F32),
            (DLDataTypeCode::FLOAT, 64, 1) => Some(Dtype::F64),
            (DLDataTypeCode::INT, 32, 1) => Some(Dtype::I32),
            (DLDataTypeCode::INT, 64, 1) => Some(Dtype::I64),
            _ => None,
        }
    }

    /// Bytes per element.
    fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F64 | Dtype::I64 => 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contrib::examplejson::graph::{broadcast_shapes, Graph};
    use dlpark::ffi::DLDevice;
    use std::ptr::null_mut;

    use crate::contrib::examplejson::graph::GUIDE_SEED as SEED;

    fn dl<T: Element>(data: &mut [T], shape: &mut [i64]) -> DLTensor {
        DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: DLDataType {
                code: T::CODE,
                bits: T::BITS,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: null_mut(),
            byte_offset: 0,
        }
    }

    fn dims(shape: &[usize]) -> Vec<i64> {
        shape.iter().map(|&d| d as i64).collect()
    }

    /// Runs `sub` through the DLTensor entry on copies of `inputs`.
    fn call<T: Element>(sub: &Subgraph, inputs: &[Vec<T>]) -> Result<Vec<T>> {
        let mut ins = inputs.to_vec();
        let mut shapes: Vec<Vec<i64>> = (0..ins.len())
            .map(|k| dims(sub.input_shape(k).unwrap()))
            .collect();
        let mut out = vec![T::default(); sub.output_shape().iter().product()];
        let mut out_shape = dims(sub.output_shape());
        let mut tensors: Vec<DLTensor> = ins
            .iter_mut()
            .zip(shapes.iter_mut())
            .map(|(d, s)| dl(d, s))
            .collect();
        tensors.push(dl(&mut out, &mut out_shape));
        let args: Vec<&DLTensor> = tensors.iter().collect();
        // SAFETY: every tensor points at a live Vec of its declared shape.
        unsafe { sub.run(&args)? };
        Ok(out)
    }

    /// A plain interpreter: every node over whole tensors, with index arithmetic for
    /// broadcasting. The engine must match it exactly.
    fn reference<T: Element>(
        sub: &Subgraph,
        inputs: &[Vec<T>],
        f: impl Fn(Op, T, T) -> T,
    ) -> Vec<T> {
        let nodes = sub.nodes();
        let mut vals: Vec<Vec<T>> = Vec::new();
        for node in nodes {
            let v = match &node.kind {
                NodeKind::Input { arg } => inputs[*arg].clone(),
                NodeKind::Compute { op, operands } => {
                    let rank = node.shape.len();
                    (0..node.num_elements())
                        .map(|i| {
                            let mut coords = vec![0; rank];
                            let mut rest = i;
                            for d in (0..rank).rev() {
                                coords[d] = rest % node.shape[d];
                                rest /= node.shape[d];
                            }
                            let get = |o: usize| {
                                let s = &nodes[o].shape;
                                let mut idx = 0;
                                for (d, &dim) in s.iter().enumerate() {
                                    let c = coords[rank - s.len() + d];
                                    idx = idx * dim + if dim == 1 { 0 } else { c };
                                }
                                vals[o][idx]
                            };
                            let a = get(operands[0]);
                            let b = operands.get(1).map_or(a, |&o| get(o));
                            f(*op, a, b)
                        })
                        .collect()
                }
            };
            vals.push(v);
        }
        vals.pop().unwrap()
    }

    fn float_op(op: Op, a: f64, b: f64) -> f64 {
        match op {
            Op::Add => a + b,
            Op::Sub => a - b,
            Op::Mul => a * b,
            Op::Div => a / b,
            Op::Maximum => {
                if a > b {
                    a
                } else {
                    b
                }
            }
            Op::Minimum => {
                if a < b {
                    a
                } else {
                    b
                }
            }
            Op::Relu => {
                if a > 0.0 {
                    a
                } else {
                    0.0
                }
            }
        }
    }

    fn int_op(op: Op, a: i64, b: i64) -> i64 {
        match op {
            Op::Add => a.wrapping_add(b),
            Op::Sub => a.wrapping_sub(b),
            Op::Mul => a.wrapping_mul(b),
            Op::Div => a.wrapping_div(b),
            Op::Maximum => a.max(b),
            Op::Minimum => a.min(b),
            Op::Relu => a.max(0),
        }
    }

    fn same_f64(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
    }

    /// A small deterministic generator (no external crates).
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
        fn values(&mut self, n: usize) -> Vec<f64> {
            (0..n)
                .map(|_| (self.below(41) as f64 - 20.0) * 0.25)
                .collect()
        }
    }

    #[test]
    fn guide_subgraph_computes_real_values() {
        let g = Graph::parse(SEED).unwrap();
        let s = g.subgraph("subgraph_0").unwrap();
        let a: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..100).map(|i| 100.0 - i as f32).collect();
        let c: Vec<f32> = (0..100).map(|i| (i % 7) as f32).collect();
        let d: Vec<f32> = (0..100).map(|i| 1.0 + (i % 3) as f32).collect();
        let out = call(s, &[a.clone(), b.clone(), c.clone(), d.clone()]).unwrap();
        for i in 0..100 {
            assert_eq!(out[i], ((a[i] + b[i]) - c[i]) * d[i], "element {i}");
        }
        // Spot values: i = 0: (0 + 100 - 0) * 1; i = 10: (5 + 90 - 3) * 2.
        assert_eq!(out[0], 100.0);
        assert_eq!(out[10], 184.0);
        // The Rust slice entry gives the same.
        let mut out2 = vec![0f32; 100];
        s.run_slices(&[&a, &b, &c, &d], &mut out2).unwrap();
        assert_eq!(out, out2);
    }

    fn check_all_ops<T: Element + From<i16>>(div: Vec<T>) {
        let a16 = [-7i16, -3, 0, 2, 5, 100];
        let b16 = [2i16, -3, 4, -5, 5, 3];
        let a: Vec<T> = a16.iter().map(|&x| T::from(x)).collect();
        let b: Vec<T> = b16.iter().map(|&x| T::from(x)).collect();
        let expect = |f: fn(i16, i16) -> i16| -> Vec<T> {
            a16.iter()
                .zip(&b16)
                .map(|(&x, &y)| T::from(f(x, y)))
                .collect()
        };
        let cases = [
            ("add", expect(|x, y| x + y)),
            ("sub", expect(|x, y| x - y)),
            ("mul", expect(|x, y| x * y)),
            ("maximum", expect(|x, y| x.max(y))),
            ("minimum", expect(|x, y| x.min(y))),
            ("div", div),
        ];
        let ty = std::any::type_name::<T>();
        for (name, want) in cases {
            let text = format!("f\ninput 0 2 3\ninput 1 2 3\n{name} 2 inputs: 0 1 shape: 2 3\n");
            let g = Graph::parse(&text).unwrap();
            let got = call(g.subgraph("f").unwrap(), &[a.clone(), b.clone()]).unwrap();
            assert_eq!(got, want, "{name} on {ty}");
        }
        let g = Graph::parse("f\ninput 0 6\nrelu 1 inputs: 0 shape: 6\n").unwrap();
        let got = call(g.subgraph("f").unwrap(), std::slice::from_ref(&a)).unwrap();
        assert_eq!(got, expect(|x, _| x.max(0)), "relu on {ty}");
    }

    #[test]
    fn every_op_on_every_dtype() {
        check_all_ops::<f32>(vec![-3.5, 1.0, 0.0, -0.4, 1.0, 100.0 / 3.0]);
        check_all_ops::<f64>(vec![-3.5, 1.0, 0.0, -0.4, 1.0, 100.0 / 3.0]);
        // Integer division truncates toward zero, as in C.
        check_all_ops::<i32>(vec![-3, 1, 0, 0, 1, 33]);
        check_all_ops::<i64>(vec![-3, 1, 0, 0, 1, 33]);
    }

    #[test]
    fn integer_overflow_wraps() {
        let text = "f\ninput 0 3\ninput 1 3\nadd 2 inputs: 0 1 shape: 3\n\
                    mul 3 inputs: 2 1 shape: 3\ndiv 4 inputs: 3 1 shape: 3\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        // (MAX + 1) = MIN; MIN * 1 = MIN; MIN / 1 = MIN. (MIN + -1) = MAX; MAX * -1 = -MAX;
        // -MAX / -1 = MAX. (2^30 + 2) * 2 wraps to -2^31 + 4, / 2 = -2^30 + 2.
        let out = call(s, &[vec![i32::MAX, i32::MIN, 1 << 30], vec![1, -1, 2]]).unwrap();
        assert_eq!(out, vec![i32::MIN, i32::MAX, -(1 << 30) + 2]);
        let g = Graph::parse("f\ninput 0 2\ninput 1 2\ndiv 2 inputs: 0 1 shape: 2\n").unwrap();
        let s = g.subgraph("f").unwrap();
        assert_eq!(
            call(s, &[vec![i64::MIN, 7], vec![-1, -2]]).unwrap(),
            vec![i64::MIN, -3]
        );
        assert_eq!(
            call(s, &[vec![i32::MIN, 7], vec![-1, 2]]).unwrap(),
            vec![i32::MIN, 3]
        );
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        let g = Graph::parse("f\ninput 0 3\ninput 1 3\ndiv 7 inputs: 0 1 shape: 3\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let e = call(s, &[vec![1i32, 2, 3], vec![1, 0, 1]]).unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': node 7 (div): integer division by zero"
        );
        let e = call(s, &[vec![1i64, 2, 3], vec![1, 1, 0]]).unwrap_err();
        assert_eq!(e.kind, "ValueError");
        // The scratch set survived the error: the next call works.
        assert_eq!(
            call(s, &[vec![8i32, 9, 10], vec![2, 3, 5]]).unwrap(),
            vec![4, 3, 2]
        );
        // Floats follow IEEE: no error.
        let out = call(s, &[vec![1f32, -1.0, 0.0], vec![0.0, 0.0, 0.0]]).unwrap();
        assert_eq!(out[..2], [f32::INFINITY, f32::NEG_INFINITY]);
        assert!(out[2].is_nan());
    }

    #[test]
    fn nan_follows_tvm_selects() {
        let text = "f\ninput 0 2\ninput 1 2\nmaximum 2 inputs: 0 1 shape: 2\n\
                    minimum 3 inputs: 0 1 shape: 2\nadd 4 inputs: 2 3 shape: 2\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        // max(NaN, 1) = (NaN > 1 ? NaN : 1) = 1; max(1, NaN) = NaN; likewise min.
        let out = call(s, &[vec![f64::NAN, 1.0], vec![1.0, f64::NAN]]).unwrap();
        assert_eq!(out[0], 2.0);
        assert!(out[1].is_nan());
        let g = Graph::parse("f\ninput 0 3\nrelu 1 inputs: 0 shape: 3\n").unwrap();
        let out = call(g.subgraph("f").unwrap(), &[vec![f32::NAN, -0.5, 0.5]]).unwrap();
        assert_eq!(out, vec![0.0, 0.0, 0.5]);
    }

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

    #[test]
    fn dead_nodes_are_skipped() {
        // Node 3 would divide by zero but does not reach the result.
        let text = "f\ninput 0 2\ninput 1 2\nadd 2 inputs: 0 1 shape: 2\n\
                    div 3 inputs: 0 1 shape: 2\nmul 4 inputs: 2 2 shape: 2\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        assert_eq!(call(s, &[vec![1i32, 2], vec![0, 0]]).unwrap(), vec![1, 4]);
    }

    #[test]
    fn output_may_alias_an_input() {
        let text = "f\ninput 0 3000\ninput 1 1\nsub 2 inputs: 0 1 shape: 3000\n\
                    mul 3 inputs: 2 0 shape: 3000\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("f").unwrap();
        let mut x: Vec<f64> = (0..3000).map(|i| i as f64).collect();
        let mut one = vec![1.0f64];
        let (mut sx, mut s1) = (vec![3000i64], vec![1i64]);
        let tx = dl(&mut x, &mut sx);
        let t1 = dl(&mut one, &mut s1);
        // SAFETY: both tensors point at live Vecs of their shapes; x is input and output.
        unsafe { s.run(&[&tx, &t1, &tx]).unwrap() };
        for (i, &v) in x.iter().enumerate() {
            assert_eq!(v, (i as f64 - 1.0) * i as f64);
        }
    }

    #[test]
    fn accepts_compact_strides_and_byte_offset() {
        let g =
            Graph::parse("f\ninput 0 1 4\ninput 1 1 4\nadd 2 inputs: 0 1 shape: 1 4\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let mut a = vec![-1.0f32, -1.0, 1.0, 2.0, 3.0, 4.0];
        let mut b = vec![10.0f32, 20.0, 30.0, 40.0];
        let mut out = vec![0.0f32; 4];
        let (mut sa, mut sb, mut so) = (vec![1i64, 4], vec![1i64, 4], vec![1i64, 4]);
        // Explicit compact strides; the unit dimension's stride is irrelevant.
        let (mut st_b, mut st_o) = (vec![4i64, 1], vec![999i64, 1]);
        let mut ta = dl(&mut a, &mut sa);
        ta.byte_offset = 8;
        let mut tb = dl(&mut b, &mut sb);
        tb.strides = st_b.as_mut_ptr();
        let mut to = dl(&mut out, &mut so);
        to.strides = st_o.as_mut_ptr();
        // SAFETY: live Vecs of the declared shapes (a from its third element).
        unsafe { s.run(&[&ta, &tb, &to]).unwrap() };
        assert_eq!(out, vec![11.0, 22.0, 33.0, 44.0]);
    }

    #[test]
    fn call_errors_name_the_argument() {
        let g = Graph::parse(SEED).unwrap();
        let s = g.subgraph("subgraph_0").unwrap();
        let mut bufs: Vec<Vec<f32>> = vec![vec![0.0; 100]; 5];
        let mut shapes: Vec<Vec<i64>> = vec![vec![10, 10]; 5];
        let good: Vec<DLTensor> = bufs
            .iter_mut()
            .zip(shapes.iter_mut())
            .map(|(b, s)| dl(b, s))
            .collect();
        let run = |ts: &[DLTensor]| {
            let args: Vec<&DLTensor> = ts.iter().collect();
            // SAFETY: every tensor's pointers are live; checks reject the bad ones first.
            unsafe { s.run(&args) }.unwrap_err()
        };
        let with = |i: usize, f: &dyn Fn(&mut DLTensor)| {
            let mut ts = good.clone();
            f(&mut ts[i]);
            run(&ts)
        };

        let e = run(&good[..3]);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "ValueError",
                "ExampleJSON subgraph 'subgraph_0' takes 5 arguments (4 inputs, then the \
                 output), got 3"
            )
        );
        let e = with(1, &|t| {
            t.device = DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: 1,
            }
        });
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 1 is on device cuda:1, but this runtime \
             runs on cpu only"
        );
        let e = with(0, &|t| t.dtype.bits = 16);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "TypeError",
                "ExampleJSON subgraph 'subgraph_0': argument 0 has dtype float16, supported are \
                 float32, float64, int32 and int64"
            )
        );
        let e = with(3, &|t| t.dtype.lanes = 4);
        assert!(
            e.message.contains("argument 3 has dtype float32x4"),
            "{}",
            e.message
        );
        let e = with(4, &|t| t.dtype.code = DLDataTypeCode::UINT);
        assert!(
            e.message.contains("argument 4 has dtype uint32"),
            "{}",
            e.message
        );
        let e = with(2, &|t| t.dtype.code = DLDataTypeCode::INT);
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            (
                "TypeError",
                "ExampleJSON subgraph 'subgraph_0': argument 2 has dtype int32 but argument 0 \
                 has float32; all arguments must have the same dtype"
            )
        );

        let mut small = vec![10i64, 5];
        let small = small.as_mut_ptr();
        let e = with(3, &|t| t.shape = small);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 3 has shape [10, 5], expected shape \
             [10, 10]"
        );
        let mut flat = vec![100i64];
        let flat = flat.as_mut_ptr();
        let e = with(4, &|t| {
            t.shape = flat;
            t.ndim = 1;
        });
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 4 has shape [100], expected shape [10, \
             10]"
        );
        let e = with(0, &|t| t.ndim = 1000);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 0 has ndim 1000, expected shape [10, 10]"
        );
        let e = with(0, &|t| t.shape = null_mut());
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 0 has ndim 2 and a null shape pointer, \
             expected shape [10, 10]"
        );
        let mut transposed = vec![1i64, 10];
        let transposed = transposed.as_mut_ptr();
        let e = with(2, &|t| t.strides = transposed);
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 2 is not contiguous (strides [1, 10] \
             for shape [10, 10]); pass a compact row-major tensor"
        );
        let e = with(1, &|t| t.data = null_mut());
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'subgraph_0': argument 1 has a null data pointer"
        );
        let e = with(1, &|t| t.byte_offset = 2);
        assert!(
            e.message.contains("argument 1 data pointer")
                && e.message.ends_with("is not aligned to its 4-byte elements"),
            "{}",
            e.message
        );
        let e = with(1, &|t| t.byte_offset = u64::MAX - 3);
        assert!(
            e.message.contains("overflows the address space"),
            "{}",
            e.message
        );
    }

    #[test]
    fn slice_entry_checks_counts_and_lengths() {
        let g = Graph::parse("f\ninput 0 2 2\ninput 1 2\nadd 2 inputs: 0 1 shape: 2 2\n").unwrap();
        let s = g.subgraph("f").unwrap();
        let mut out = [0.0f64; 4];
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..]], &mut out)
            .unwrap_err();
        assert_eq!(e.message, "ExampleJSON subgraph 'f' takes 2 inputs, got 1");
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[1.0][..]], &mut out)
            .unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': input 1 has 1 elements, expected 2 (shape [2])"
        );
        let e = s
            .run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[1.0, 2.0][..]], &mut out[..3])
            .unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON subgraph 'f': the output has 3 elements, expected 4 (shape [2, 2])"
        );
        s.run_slices(&[&[1.0, 2.0, 3.0, 4.0][..], &[10.0, 20.0][..]], &mut out)
            .unwrap();
        assert_eq!(out, [11.0, 22.0, 13.0, 24.0]);
    }

    #[test]
    fn graph_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Graph>();
    }
}
