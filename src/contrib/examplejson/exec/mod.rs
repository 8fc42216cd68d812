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
//!
//! The parts: `kernels` (the element types and the elementwise and broadcast kernels), `plan`
//! (the execution plan built once per subgraph), `run` (running a plan with a pooled scratch
//! set) and `entry` (the checked entry points on slices and DLTensors).

mod entry;
mod kernels;
mod plan;
mod run;
#[cfg(test)]
mod test_support;

pub use kernels::Element;
pub(crate) use plan::Executor;

/// Elements per tile of a fused stage. Small, so that every input stream of the stage advances
/// nearly in lockstep, as in a hand-fused loop: with 2048-element tiles each step streams 8 KiB
/// of one or two inputs at a time and the 4-node, 16M-element float32 benchmark
/// (benches/examplejson_bench.rs) reached about 65% of the fused loop's bandwidth; 128 gives
/// about 80% (thread CPU time, 2-core x86-64), while 32 loses to the per-step dispatch.
pub const TILE: usize = 128;
