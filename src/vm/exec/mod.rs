//! The Relax VM executable (`relax.VMExecutable`): its serialized form, decoded and checked
//! once at load time, and the module that holds it.
//!
//! Format (TVM `src/runtime/vm/executable.cc`, `include/tvm/runtime/vm/executable.h`,
//! `bytecode.h`; all integers little-endian, strings and vectors `u64` count + items):
//!
//! - header: `u64` magic (`0xD225DE2F4214151D`, or `...1E` when a memory-scope section
//!   follows the globals), then the version string, which must be `"0.14"`;
//! - global section: the function table, a vector of `{i32 kind, string name, i64 start_instr,
//!   i64 end_instr, i64 num_args, i64 register_file_size, vector<string> param_names}`;
//! - memory-scope section (second magic only): `u64` count of `{i64 constant index, string
//!   scope}`;
//! - constant section: `u64` count of `{i32 type index, value}`, the value being a tensor in
//!   TVM's tensor format (70), a shape (69: `u64` n + n `i64`), a string (65), an int (1), a
//!   float (3) or a data type (5: `u8 code, u8 bits, u16 lanes`);
//! - code section: `vector<i64>` instruction offsets, then `vector<i64>` instruction words.
//!
//! An instruction is a run of words: `Call = 1, dst, func_idx, num_args, args...`,
//! `Ret = 2, result`, `Goto = 3, pc_offset`, `If = 4, cond, false_offset`. An argument word
//! keeps its kind in the top 8 bits (register 0, immediate 1, constant 2, function 3) and a
//! sign-extended 56-bit value below. Registers from `1 << 54` are special: `void` (`+0`) and
//! `vm` (`+1`).
//!
//! Everything an instruction refers to (function and constant indexes, registers, jump targets)
//! is checked here, so the interpreter's hot loop indexes without checks of its own.

mod decode;
mod module;
mod text;

pub use module::{load_executable, ExecutableModule};

use std::collections::HashMap;

use crate::value::Any;

/// Magic of executables without a memory-scope section.
pub const MAGIC_V1: u64 = 0xD225_DE2F_4214_151D;
/// Magic of executables with a memory-scope section (what TVM 0.27 writes).
pub const MAGIC_V2: u64 = 0xD225_DE2F_4214_151E;
/// The only executable format version TVM 0.14 .. 0.27 read and write (`VM_VERSION`).
pub const VM_VERSION: &str = "0.14";
pub use crate::tensor::serialize::{read_tensor, TENSOR_MAGIC};

/// First special register (`Instruction::kBeginSpecialReg`).
pub const BEGIN_SPECIAL_REG: i64 = 1 << 54;
/// The register that reads as nothing and discards writes.
pub const VOID_REG: i64 = BEGIN_SPECIAL_REG;
/// The register that reads as the VM context pointer.
pub const VM_REG: i64 = BEGIN_SPECIAL_REG + 1;

/// Kind of a function-table entry (`VMFuncInfo::FuncKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncKind {
    /// A packed function found in the imports or the global registry.
    PackedFunc,
    /// A function interpreted from the executable's bytecode.
    VMFunc,
    /// A function compiled to TIR (`__vmtir__<name>` in the kernel library).
    VMTIRFunc,
}

/// One entry of the function table.
#[derive(Clone, Debug)]
pub struct FuncInfo {
    /// What kind of function this is.
    pub kind: FuncKind,
    /// The global name.
    pub name: String,
    /// First instruction (VM functions).
    pub start_instr: usize,
    /// One past the last instruction (VM functions).
    pub end_instr: usize,
    /// Declared argument count (`-2` for packed functions, whose arity is unknown).
    pub num_args: i64,
    /// Registers a call frame of this function needs.
    pub register_file_size: usize,
    /// Parameter names (VM functions).
    pub param_names: Vec<String>,
}

/// A register read by an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// A slot of the current frame.
    Slot(usize),
    /// The `void` register: reads as None.
    Void,
    /// The `vm` register: reads as the VM context pointer.
    Vm,
}

/// A decoded call argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Read a register.
    Reg(Reg),
    /// An integer immediate.
    Imm(i64),
    /// A constant-pool entry (index checked).
    Const(usize),
    /// A function-table entry (index checked).
    Func(usize),
}

/// A decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instr {
    /// Call `func`, with arguments `args[start..start+len]` of [`Executable::call_args`];
    /// store the result in `dst` (`None`: discard).
    Call {
        /// Destination slot (`None` for the special registers).
        dst: Option<usize>,
        /// Function-table index.
        func: usize,
        /// Start of the arguments in [`Executable::call_args`].
        args_start: usize,
        /// Number of arguments.
        args_len: usize,
    },
    /// Return a register.
    Ret(Reg),
    /// Jump by an offset.
    Goto(i64),
    /// Continue when the register holds a nonzero int, else jump by `false_offset`.
    If {
        /// The condition register.
        cond: Reg,
        /// Offset of the false branch (> 1).
        false_offset: i64,
    },
}

/// The tensors of a constant pool (see [`Executable::constant_totals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConstantTotals {
    /// Tensors in the pool.
    pub tensors: usize,
    /// Their data bytes.
    pub bytes: u64,
    /// Tensors used where they lie in the loaded library (not copied).
    pub in_place: usize,
    /// Their data bytes.
    pub in_place_bytes: u64,
}

/// A decoded, checked `relax.VMExecutable`.
pub struct Executable {
    /// The function table.
    pub funcs: Vec<FuncInfo>,
    /// Name to index in [`Executable::funcs`] (the last entry wins on duplicates, as in TVM).
    pub func_map: HashMap<String, usize>,
    /// The constant pool.
    pub constants: Vec<Any>,
    /// Memory scopes by constant index.
    pub memory_scopes: Vec<(i64, String)>,
    /// Decoded instructions, by instruction index.
    pub instrs: Vec<Instr>,
    /// Arguments of every call, referenced by [`Instr::Call`].
    pub call_args: Vec<Arg>,
    /// Whether the header had the memory-scope magic.
    pub has_memory_scopes: bool,
    /// The raw instruction offsets and words (for printing and saving).
    instr_offset: Vec<i64>,
    instr_data: Vec<i64>,
    /// The exact bytes this executable was loaded from (saving writes them back); not a copy
    /// when they lie in a mapped library.
    bytes: crate::mapped::KeptBytes,
}

// SAFETY (Send/Sync): the constants are immutable after loading: shapes, strings, ints, floats,
// dtypes and tensors whose data nothing writes (kernels receive them as inputs). `Any` is only
// `!Send` because it may hold a raw pointer, which the constant pool never does.
unsafe impl Send for Executable {}
// SAFETY: as above.
unsafe impl Sync for Executable {}

impl Executable {
    /// The function named `name`.
    pub fn func(&self, name: &str) -> Option<(usize, &FuncInfo)> {
        self.func_map.get(name).map(|&i| (i, &self.funcs[i]))
    }

    /// The bytes this executable was loaded from.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Whether [`Executable::bytes`] are read where the loaded library maps them (not copied).
    pub fn bytes_in_place(&self) -> bool {
        self.bytes.is_lent()
    }

    /// The model's weights: the tensors of the constant pool, and how many of them are used
    /// where they lie in the loaded library rather than copied.
    pub fn constant_totals(&self) -> ConstantTotals {
        let loaded_from = self.bytes().as_ptr_range();
        let mut totals = ConstantTotals::default();
        for c in &self.constants {
            let Some(t) = c
                .view()
                .as_object()
                .and_then(|o| crate::tensor::Tensor::from_object(o).ok())
            else {
                continue;
            };
            let n = t.nbytes() as u64;
            totals.tensors += 1;
            totals.bytes += n;
            if loaded_from.contains(&t.data_ptr().cast_const().cast::<u8>()) {
                totals.in_place += 1;
                totals.in_place_bytes += n;
            }
        }
        totals
    }

    /// What `func`'s `vm.builtin.alloc_storage` calls allocate: the bytes of those whose size
    /// is a constant (the activation storage TVM's compiler planned), and how many calls have
    /// a size known only at run time.
    pub fn planned_storage(&self, func: &FuncInfo) -> (u64, usize) {
        let (mut bytes, mut dynamic) = (0u64, 0usize);
        let end = func.end_instr.min(self.instrs.len());
        for instr in &self.instrs[func.start_instr.min(end)..end] {
            let Instr::Call {
                func: callee,
                args_start,
                args_len,
                ..
            } = *instr
            else {
                continue;
            };
            if self.funcs.get(callee).map(|f| f.name.as_str()) != Some("vm.builtin.alloc_storage") {
                continue;
            }
            let args = &self.call_args[args_start..args_start + args_len];
            let constant = |i: usize| match args.get(i) {
                Some(Arg::Const(k)) => self.constants.get(*k),
                _ => None,
            };
            let dims = constant(1)
                .and_then(|c| c.view().as_object())
                .and_then(|o| crate::object::shape::shape_dims(&o).map(<[i64]>::to_vec));
            let dtype = constant(3).and_then(|c| c.view().as_dtype());
            match (dims, dtype) {
                (Some(dims), Some(dt)) => {
                    let numel: u64 = dims.iter().map(|&d| d.max(0) as u64).product();
                    bytes += numel * (u64::from(dt.bits) * u64::from(dt.lanes)).div_ceil(8);
                }
                _ => dynamic += 1,
            }
        }
        (bytes, dynamic)
    }
}
