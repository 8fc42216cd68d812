//! RNN state for state-space and recurrent language models (TVM `rnn_state.cc`,
//! `relax.vm.RNNStateImp`): per layer, one storage tensor per state of shape
//! `(reserved_num_seqs, max_history, *state_shape)`, a slot per sequence and a ring of
//! `max_history` states per slot so the last few steps can be popped. The model reads and
//! writes states through the kernels it hands over (`f_gets`, `f_sets`), given the slot and
//! history index of each sequence of the batch.

use std::collections::HashMap;

use super::args::Args;
use super::guarded::Guarded;
use super::kv_state::KvState;
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

#[derive(Clone)]
struct Sequence {
    seq_length: i64,
    /// Steps that can be popped.
    available_history: i64,
    /// Where the current state is in the slot's ring.
    history_slot: i64,
    seq_slot: i64,
}

struct State {
    seqs: HashMap<i64, Sequence>,
    free_slots: Vec<i64>,
    batch: Option<(Vec<i64>, Vec<i64>)>,
    dirty: bool,
    /// The slot and history index of each sequence of the batch, on the device.
    slot_ids: Option<(Tensor, Tensor)>,
}

/// An RNN state object.
pub struct RnnState {
    num_layers: i64,
    reserved_num_seqs: i64,
    max_history: i64,
    init_values: Vec<Tensor>,
    /// `storages[layer][state]`.
    storages: Vec<Vec<Tensor>>,
    f_gets: Vec<Function>,
    f_sets: Vec<Function>,
    device: DLDevice,
    state: Guarded<State>,
}

// SAFETY: no public cell; the state is behind a mutex and the rest is immutable. The index is
// registered once under `relax.vm.RNNStateImp`.
unsafe impl ObjectPayload for RnnState {
    const TYPE_INDEX: i32 = crate::abi::type_index::OBJECT;
    fn type_index() -> i32 {
        super::types::rnn_state()
    }
}

// The payload is shared between threads (the safety claim above): checked here.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<RnnState>();
};

fn not_found(seq_id: i64) -> Error {
    Error::value(format!(
        "The sequence \"{seq_id}\" cannot be found in the space state storage."
    ))
}

impl RnnState {
    /// `vm.builtin.rnn_state_create(num_layers, reserved_num_seqs, max_history, f_gets,
    /// f_sets, init_layer_value)`.
    pub fn create(args: &Args<'_, '_>) -> Result<RnnState> {
        let num_layers = args.i64(0, "num_layers")?;
        let reserved_num_seqs = args.i64(1, "reserved_num_seqs")?;
        let max_history = args.i64(2, "max_history")?;
        let f_gets = args.functions(3, "f_gets")?;
        let f_sets = args.functions(4, "f_sets")?;
        let init_values = args.tensors(5, "init_layer_value")?;
        if num_layers <= 0 {
            crate::bail_value!("The number of layers should be greater than 0.");
        }
        if reserved_num_seqs <= 0 {
            crate::bail_value!("The number of reserved sequences should be greater than 0.");
        }
        // TVM accepts 0 here and then requires a positive count when allocating.
        if max_history <= 0 {
            crate::bail_value!("At least 1 history slot to store the current state");
        }
        if init_values.is_empty() {
            crate::bail_value!("The number of states per layer should be greater than 0.");
        }
        let device = init_values[0].device();
        for t in &init_values {
            let d = t.device();
            if d.device_type != device.device_type || d.device_id != device.device_id {
                crate::bail_value!("The device type of all states should be the same.");
            }
            if !t.is_contiguous() {
                crate::bail_value!("vm.builtin.rnn_state_create: initial states must be compact");
            }
        }
        for (fs, name) in [(&f_gets, "getters"), (&f_sets, "setters")] {
            if fs.len() != init_values.len() {
                crate::bail_value!(
                    "The number of state {name} should be the same as the number of states per \
                     layer, but got {} and {} respectively.",
                    fs.len(),
                    init_values.len()
                );
            }
        }
        let mut storages = Vec::with_capacity(num_layers as usize);
        for _ in 0..num_layers {
            let mut layer = Vec::with_capacity(init_values.len());
            for init in &init_values {
                let mut shape = vec![reserved_num_seqs, max_history];
                shape.extend_from_slice(init.shape());
                layer.push(Tensor::empty(&shape, init.dtype(), device)?);
            }
            storages.push(layer);
        }
        Ok(RnnState {
            num_layers,
            reserved_num_seqs,
            max_history,
            init_values,
            storages,
            f_gets,
            f_sets,
            device,
            state: Guarded::new(State {
                seqs: HashMap::new(),
                free_slots: (0..reserved_num_seqs).rev().collect(),
                batch: None,
                dirty: false,
                slot_ids: None,
            }),
        })
    }

    fn storage(&self, layer_id: i64, state_id: i64, func: &str) -> Result<&Tensor> {
        self.storages
            .get(usize::try_from(layer_id).unwrap_or(usize::MAX))
            .and_then(|l| l.get(usize::try_from(state_id).unwrap_or(usize::MAX)))
            .ok_or_else(|| {
                Error::index(format!(
                    "{func}: no state {state_id} of layer {layer_id} ({} layers, {} states each)",
                    self.num_layers,
                    self.init_values.len()
                ))
            })
    }

    /// The state of one sequence at one history index (`GetStatePtrBySeqHistory`).
    fn state_view(&self, storage: &Tensor, seq_slot: i64, history: i64) -> Result<Tensor> {
        let shape = &storage.shape()[2..];
        let size: i64 = shape.iter().product();
        let bytes = crate::dtype::element_bytes(storage.dtype()) as i64;
        storage.view(
            shape,
            storage.dtype(),
            ((seq_slot * self.max_history + history) * size * bytes) as u64,
        )
    }

    /// All history states of one slot (`GetStatePtrBySeq`).
    fn slot_view(&self, storage: &Tensor, seq_slot: i64) -> Result<Tensor> {
        let shape = &storage.shape()[1..];
        let size: i64 = shape.iter().product();
        let bytes = crate::dtype::element_bytes(storage.dtype()) as i64;
        storage.view(shape, storage.dtype(), (seq_slot * size * bytes) as u64)
    }

    /// The slot and history arrays of the batch on the device (`SyncAuxArrayToDevice`).
    fn sync(&self, st: &mut State) -> Result<()> {
        let (ids, _) = st.batch.as_ref().ok_or_else(|| Error::runtime(NO_BATCH))?;
        let mut slots = Vec::with_capacity(ids.len());
        let mut history = Vec::with_capacity(ids.len());
        for id in ids {
            let s = st.seqs.get(id).ok_or_else(|| not_found(*id))?;
            slots.push(s.seq_slot as i32);
            history.push(s.history_slot as i32);
        }
        st.slot_ids = Some((
            super::transfer::tensor_from_i32(&slots, self.device)?,
            super::transfer::tensor_from_i32(&history, self.device)?,
        ));
        st.dirty = false;
        Ok(())
    }

    fn with_batch(&self, func: &str, f: impl FnOnce(&Tensor, &Tensor) -> Result<()>) -> Result<()> {
        let st = self.state.lock("RNN state")?;
        if st.dirty || st.slot_ids.is_none() {
            return Err(Error::runtime(format!(
                "{func}: The auxiliary arrays are not synchronized to device. Please call \
                 `BeginForward` to synchronize before calling it."
            )));
        }
        let (slots, history) = st.slot_ids.as_ref().unwrap();
        f(slots, history)
    }

    /// `Get`: the batch's current states into `out` (batch, *state_shape).
    pub fn get(&self, layer_id: i64, state_id: i64, out: &Tensor) -> Result<()> {
        const F: &str = "vm.builtin.rnn_state_get";
        let storage = self.storage(layer_id, state_id, F)?;
        self.with_batch(F, |slots, history| {
            self.f_gets[state_id as usize]
                .call_values(&[
                    Any::from(storage.clone()),
                    Any::from(slots.clone()),
                    Any::from(history.clone()),
                    Any::from(out.clone()),
                ])
                .map(drop)
        })
    }

    /// `Set`: the batch's next states from `data` (batch, *state_shape).
    pub fn set(&self, layer_id: i64, state_id: i64, data: &Tensor) -> Result<()> {
        const F: &str = "vm.builtin.rnn_state_set";
        let storage = self.storage(layer_id, state_id, F)?;
        self.with_batch(F, |slots, history| {
            self.f_sets[state_id as usize]
                .call_values(&[
                    Any::from(storage.clone()),
                    Any::from(slots.clone()),
                    Any::from(history.clone()),
                    Any::from(data.clone()),
                ])
                .map(drop)
        })
    }

    /// `DebugGet`: a copy of one sequence's current state.
    pub fn debug_get(&self, layer_id: i64, state_id: i64, seq_id: i64) -> Result<Tensor> {
        let storage = self.storage(layer_id, state_id, "vm.builtin.rnn_state_debug_get")?;
        let st = self.state.lock("RNN state")?;
        let s = st.seqs.get(&seq_id).ok_or_else(|| not_found(seq_id))?;
        let src = self.state_view(storage, s.seq_slot, s.history_slot)?;
        let out = Tensor::empty(src.shape(), src.dtype(), src.device())?;
        out.copy_from(&src)?;
        Ok(out)
    }
}

const NO_BATCH: &str = "the RNN state has no forward prepared: call \
    vm.builtin.kv_state_begin_forward first";

impl KvState for RnnState {
    fn clear(&self) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        st.seqs.clear();
        st.free_slots = (0..self.reserved_num_seqs).rev().collect();
        st.dirty = false;
        st.batch = None;
        st.slot_ids = None;
        Ok(())
    }

    fn add_sequence(&self, seq_id: i64) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        if st.seqs.contains_key(&seq_id) {
            crate::bail_value!("The sequence \"{seq_id}\" is already in the space state storage.");
        }
        let slot = *st.free_slots.last().ok_or_else(|| {
            Error::runtime("The Sequence slot is full, cannot accept new sequence.")
        })?;
        for layer in &self.storages {
            for (storage, init) in layer.iter().zip(&self.init_values) {
                self.state_view(storage, slot, 0)?.copy_from(init)?;
            }
        }
        st.free_slots.pop();
        st.seqs.insert(
            seq_id,
            Sequence {
                seq_length: 0,
                available_history: 0,
                history_slot: 0,
                seq_slot: slot,
            },
        );
        st.dirty = true;
        Ok(())
    }

    fn remove_sequence(&self, seq_id: i64) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        let s = st.seqs.remove(&seq_id).ok_or_else(|| not_found(seq_id))?;
        st.free_slots.push(s.seq_slot);
        st.dirty = true;
        Ok(())
    }

    fn fork_sequence(&self, parent: i64, child: i64, _fork_pos: i64) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        let p = st.seqs.get(&parent).cloned().ok_or_else(|| {
            Error::value(format!(
                "The parent sequence \"{parent}\" cannot be found in space state storage."
            ))
        })?;
        if st.seqs.contains_key(&child) {
            crate::bail_value!(
                "The child sequence \"{child}\" is already in the space state storage."
            );
        }
        let slot = *st.free_slots.last().ok_or_else(|| {
            Error::runtime("The Sequence slot is full, cannot accept new sequence.")
        })?;
        for layer in &self.storages {
            for storage in layer {
                self.slot_view(storage, slot)?
                    .copy_from(&self.slot_view(storage, p.seq_slot)?)?;
            }
        }
        st.free_slots.pop();
        st.seqs.insert(
            child,
            Sequence {
                seq_slot: slot,
                ..p
            },
        );
        st.dirty = true;
        Ok(())
    }

    fn popn(&self, seq_id: i64, n: i32) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        let max_history = self.max_history;
        let s = st.seqs.get_mut(&seq_id).ok_or_else(|| {
            Error::value(format!(
                "The sequence \"{seq_id}\" cannot be found in space state."
            ))
        })?;
        let n = n as i64;
        if n < 0 {
            crate::bail_value!("The length of rolling back {n} cannot be negative.");
        }
        if n > s.available_history {
            crate::bail_value!(
                "The sequence only has {} available history in the space state storage, while \
                 the length of rollback is {n} which exceeds the sequence length.",
                s.available_history
            );
        }
        s.seq_length -= n;
        s.available_history -= n;
        s.history_slot = (s.history_slot - n + max_history) % max_history;
        st.dirty = true;
        Ok(())
    }

    fn begin_forward(
        &self,
        seq_ids: &[i64],
        append_lengths: &[i64],
        tree: Option<&[i64]>,
    ) -> Result<()> {
        if seq_ids.len() != append_lengths.len() {
            crate::bail_value!(
                "The seq_ids size ({}) and append_lengths size ({}) mismatch.",
                seq_ids.len(),
                append_lengths.len()
            );
        }
        if seq_ids.is_empty() {
            crate::bail_value!("BeginForward needs at least one sequence.");
        }
        if let Some(t) = tree {
            let total: i64 = append_lengths.iter().sum();
            if t.len() as i64 != total {
                crate::bail_value!("Unexpected token tree size for the RNN state.");
            }
            let mut at = 0;
            for &len in append_lengths {
                for i in 0..len {
                    if t[at] != i - 1 {
                        crate::bail_value!(
                            "Unexpected token tree for RNN state. RNN state only supports chains \
                             as token trees."
                        );
                    }
                    at += 1;
                }
            }
        }
        let mut st = self.state.lock("RNN state")?;
        for id in seq_ids {
            if !st.seqs.contains_key(id) {
                return Err(not_found(*id));
            }
        }
        st.batch = Some((seq_ids.to_vec(), append_lengths.to_vec()));
        if st.dirty || st.slot_ids.is_none() {
            self.sync(&mut st)?;
        }
        Ok(())
    }

    fn end_forward(&self) -> Result<()> {
        let mut st = self.state.lock("RNN state")?;
        let (ids, lengths) = st.batch.clone().ok_or_else(|| Error::runtime(NO_BATCH))?;
        for id in &ids {
            if !st.seqs.contains_key(id) {
                return Err(not_found(*id));
            }
        }
        for (id, len) in ids.iter().zip(&lengths) {
            let max_history = self.max_history;
            let s = st.seqs.get_mut(id).unwrap();
            s.seq_length += len;
            // A prefill cannot be rolled back.
            s.available_history = if *len > 1 {
                0
            } else {
                (s.available_history + 1).min(max_history - 1)
            };
            s.history_slot = (s.history_slot + 1) % max_history;
        }
        st.dirty = true;
        Ok(())
    }
}

/// `vm.builtin.rnn_state_*`.
pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    fn state<'o>(args: &Args<'_, '_>, obj: &'o ObjectRef) -> Result<&'o RnnState> {
        obj.downcast_ref::<RnnState>().ok_or_else(|| {
            args.get(0).type_mismatch(
                &format!("{} argument 0 (state)", args.func()),
                "relax.vm.RNNState",
            )
        })
    }
    vec![
        (
            "vm.builtin.rnn_state_create",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.rnn_state_create", raw, 6)?;
                Ok(Any::from_object(new_object(RnnState::create(&args)?)))
            }),
        ),
        (
            "vm.builtin.rnn_state_get",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.rnn_state_get", raw, 4)?;
                let obj = args.object(0, "state")?;
                state(&args, &obj)?.get(
                    args.i64(1, "layer_id")?,
                    args.i64(2, "state_id")?,
                    &args.tensor(3, "o_data")?,
                )?;
                Ok(Any::none())
            }),
        ),
        (
            "vm.builtin.rnn_state_set",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.rnn_state_set", raw, 4)?;
                let obj = args.object(0, "state")?;
                state(&args, &obj)?.set(
                    args.i64(1, "layer_id")?,
                    args.i64(2, "state_id")?,
                    &args.tensor(3, "data")?,
                )?;
                Ok(Any::from_object(obj.clone()))
            }),
        ),
        (
            "vm.builtin.rnn_state_debug_get",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.rnn_state_debug_get", raw, 4)?;
                let obj = args.object(0, "state")?;
                let t = state(&args, &obj)?.debug_get(
                    args.i64(1, "layer_id")?,
                    args.i64(2, "state_id")?,
                    args.i64(3, "seq_id")?,
                )?;
                Ok(Any::from(t))
            }),
        ),
    ]
}
