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

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::abi::DLDataType;
use crate::dtype::{dtype, dtype_to_string};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::blob::Reader;
use crate::module::{Module, ModuleKind};
use crate::object::shape::{new_shape, shape_dims};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

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

fn section_err(section: &str, e: Error) -> Error {
    Error::value(format!(
        "invalid relax.VMExecutable: {section} section: {}",
        e.message
    ))
}

fn read_i64(r: &mut Reader<'_>) -> Result<i64> {
    Ok(r.read_u64()? as i64)
}

fn read_i32(r: &mut Reader<'_>) -> Result<i32> {
    Ok(r.read_u32()? as i32)
}

fn read_dtype(r: &mut Reader<'_>) -> Result<DLDataType> {
    let b = r.read_raw(4)?;
    Ok(dtype(b[0], b[1], u16::from_le_bytes([b[2], b[3]])))
}

/// Reads a `u64` count of items of at least `min_item` bytes each, refusing counts the
/// remaining bytes cannot hold (so callers may allocate by it).
fn read_count(r: &mut Reader<'_>, min_item: usize, what: &str) -> Result<usize> {
    let at = r.position();
    let n = r.read_u64()?;
    if n > (r.remaining() / min_item.max(1)) as u64 {
        crate::bail_value!(
            "{what} count {n} at byte {at} cannot fit in the {} bytes that remain",
            r.remaining()
        );
    }
    Ok(n as usize)
}

fn read_i64_vec(r: &mut Reader<'_>, what: &str) -> Result<Vec<i64>> {
    let n = read_count(r, 8, what)?;
    (0..n).map(|_| read_i64(r)).collect()
}

fn to_index(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::value(format!("{what} {v} is negative")))
}

impl Executable {
    /// Decodes and checks an executable from the bytes TVM's `SaveToBytes` wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Executable> {
        let mut r = Reader::new(bytes);
        let magic = r.read_u64().map_err(|e| section_err("header", e))?;
        if magic != MAGIC_V1 && magic != MAGIC_V2 {
            return Err(Error::value(format!(
                "invalid relax.VMExecutable: bad magic {magic:#018x} (expected {MAGIC_V1:#018x} \
                 or {MAGIC_V2:#018x})"
            )));
        }
        let version = r.read_string().map_err(|e| section_err("version", e))?;
        if version != VM_VERSION {
            return Err(Error::value(format!(
                "unsupported relax.VMExecutable format version \"{version}\": tvmrt reads \
                 version \"{VM_VERSION}\" (written by TVM 0.14 through 0.27)"
            )));
        }
        let funcs = Self::read_globals(&mut r).map_err(|e| section_err("global", e))?;
        let has_memory_scopes = magic == MAGIC_V2;
        let memory_scopes = if has_memory_scopes {
            Self::read_memory_scopes(&mut r).map_err(|e| section_err("memory scope", e))?
        } else {
            Vec::new()
        };
        let constants = Self::read_constants(&mut r).map_err(|e| section_err("constant", e))?;
        let instr_offset =
            read_i64_vec(&mut r, "instruction offset").map_err(|e| section_err("code", e))?;
        let instr_data =
            read_i64_vec(&mut r, "instruction word").map_err(|e| section_err("code", e))?;
        if !r.is_at_end() {
            return Err(Error::value(format!(
                "invalid relax.VMExecutable: {} trailing bytes after the code section",
                r.remaining()
            )));
        }
        let mut func_map = HashMap::new();
        for (i, f) in funcs.iter().enumerate() {
            func_map.insert(f.name.clone(), i);
        }
        let mut exec = Executable {
            funcs,
            func_map,
            constants,
            memory_scopes,
            instrs: Vec::new(),
            call_args: Vec::new(),
            has_memory_scopes,
            instr_offset,
            instr_data,
            bytes: crate::mapped::KeptBytes::keep(bytes),
        };
        exec.decode_code().map_err(|e| section_err("code", e))?;
        exec.check_functions().map_err(|e| section_err("code", e))?;
        Ok(exec)
    }

    fn read_globals(r: &mut Reader<'_>) -> Result<Vec<FuncInfo>> {
        // An entry is at least 4 + 8 + 4 * 8 + 8 bytes.
        let n = read_count(r, 52, "function")?;
        let mut funcs = Vec::with_capacity(n);
        for i in 0..n {
            let kind = match read_i32(r)? {
                0 => FuncKind::PackedFunc,
                1 => FuncKind::VMFunc,
                2 => FuncKind::VMTIRFunc,
                k => crate::bail_value!("function {i} has unknown kind {k}"),
            };
            let name = r.read_string()?.to_string();
            let start = read_i64(r)?;
            let end = read_i64(r)?;
            let num_args = read_i64(r)?;
            let regs = read_i64(r)?;
            let names = r.read_string_vec()?;
            let (start_instr, end_instr, register_file_size) = if kind == FuncKind::PackedFunc {
                (0, 0, 0)
            } else {
                let s = to_index(start, "start instruction")?;
                let e = to_index(end, "end instruction")?;
                let rf = to_index(regs, "register file size")?;
                if s > e {
                    crate::bail_value!("function `{name}` has instructions [{s}, {e})");
                }
                if num_args < 0 || num_args as u64 > rf as u64 {
                    crate::bail_value!(
                        "function `{name}` takes {num_args} arguments but has {rf} registers"
                    );
                }
                (s, e, rf)
            };
            funcs.push(FuncInfo {
                kind,
                name,
                start_instr,
                end_instr,
                num_args,
                register_file_size,
                param_names: names.into_iter().map(str::to_string).collect(),
            });
        }
        Ok(funcs)
    }

    fn read_memory_scopes(r: &mut Reader<'_>) -> Result<Vec<(i64, String)>> {
        let n = read_count(r, 16, "memory scope")?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let idx = read_i64(r)?;
            let scope = r.read_string()?.to_string();
            out.push((idx, scope));
        }
        Ok(out)
    }

    fn read_constants(r: &mut Reader<'_>) -> Result<Vec<Any>> {
        let n = read_count(r, 4, "constant")?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let at = r.position();
            let ty = read_i32(r)?;
            let v = match ty {
                crate::abi::type_index::TENSOR => Any::from(
                    read_tensor(r)
                        .map_err(|e| Error::value(format!("constant {i}: {}", e.message)))?,
                ),
                crate::abi::type_index::SHAPE => {
                    let dims = read_i64_vec(r, "shape dimension")?;
                    Any::from_object(new_shape(&dims))
                }
                crate::abi::type_index::STR => {
                    let s = r.read_string()?;
                    Any::from(s)
                }
                crate::abi::type_index::INT => Any::from(read_i64(r)?),
                crate::abi::type_index::FLOAT => Any::from(f64::from_bits(r.read_u64()?)),
                crate::abi::type_index::DATA_TYPE => Any::from(read_dtype(r)?),
                other => crate::bail_value!(
                    "constant {i} at byte {at} has type index {other} ({}); the constant pool \
                     holds only tensors, shapes, strings, ints, floats and data types",
                    crate::value::type_name(other)
                ),
            };
            out.push(v);
        }
        Ok(out)
    }

    fn decode_reg(&self, v: i64, what: &str) -> Result<Reg> {
        match v {
            VOID_REG => Ok(Reg::Void),
            VM_REG => Ok(Reg::Vm),
            v if (0..BEGIN_SPECIAL_REG).contains(&v) => Ok(Reg::Slot(v as usize)),
            v => crate::bail_value!("{what} register {v} is invalid"),
        }
    }

    fn decode_code(&mut self) -> Result<()> {
        let words = &self.instr_data;
        let word = |i: usize| -> Result<i64> {
            words.get(i).copied().ok_or_else(|| {
                Error::value(format!(
                    "instruction word {i} is past the end ({} words)",
                    words.len()
                ))
            })
        };
        let mut instrs = Vec::with_capacity(self.instr_offset.len());
        let mut call_args = Vec::new();
        for (pc, &off) in self.instr_offset.iter().enumerate() {
            let off = to_index(off, "instruction offset")?;
            let op = word(off)?;
            let instr = match op {
                1 => {
                    let dst = word(off + 1)?;
                    let func = word(off + 2)?;
                    let n = word(off + 3)?;
                    let func = usize::try_from(func)
                        .ok()
                        .filter(|&f| f < self.funcs.len())
                        .ok_or_else(|| {
                            Error::value(format!(
                                "instruction {pc} calls function index {func}, but the table \
                                 has {} functions",
                                self.funcs.len()
                            ))
                        })?;
                    let n = usize::try_from(n)
                        .ok()
                        .filter(|&n| n <= words.len())
                        .ok_or_else(|| {
                            Error::value(format!("instruction {pc} has {n} arguments"))
                        })?;
                    let args_start = call_args.len();
                    for a in 0..n {
                        let data = word(off + 4 + a)?;
                        call_args.push(self.decode_arg(data, pc)?);
                    }
                    let dst = match self.decode_reg(dst, "destination")? {
                        Reg::Slot(s) => Some(s),
                        _ => None,
                    };
                    Instr::Call {
                        dst,
                        func,
                        args_start,
                        args_len: n,
                    }
                }
                2 => Instr::Ret(self.decode_reg(word(off + 1)?, "result")?),
                3 => Instr::Goto(word(off + 1)?),
                4 => Instr::If {
                    cond: self.decode_reg(word(off + 1)?, "condition")?,
                    false_offset: word(off + 2)?,
                },
                op => crate::bail_value!("instruction {pc} has unknown opcode {op}"),
            };
            instrs.push(instr);
        }
        self.instrs = instrs;
        self.call_args = call_args;
        Ok(())
    }

    fn decode_arg(&self, data: i64, pc: usize) -> Result<Arg> {
        // Kind in the top 8 bits, value sign-extended from the low 56 (`Instruction::Arg`).
        let kind = ((data as u64) >> 56) as u8;
        let value = (data << 8) >> 8;
        Ok(match kind {
            0 => Arg::Reg(self.decode_reg(value, "argument")?),
            1 => Arg::Imm(value),
            2 => Arg::Const(
                usize::try_from(value)
                    .ok()
                    .filter(|&c| c < self.constants.len())
                    .ok_or_else(|| {
                        Error::value(format!(
                            "instruction {pc} reads constant {value}, but the pool has {}",
                            self.constants.len()
                        ))
                    })?,
            ),
            3 => Arg::Func(
                usize::try_from(value)
                    .ok()
                    .filter(|&f| f < self.funcs.len())
                    .ok_or_else(|| {
                        Error::value(format!(
                            "instruction {pc} refers to function {value}, but the table has {}",
                            self.funcs.len()
                        ))
                    })?,
            ),
            k => crate::bail_value!("instruction {pc} has an argument of unknown kind {k}"),
        })
    }

    /// Checks every VM function's instructions against its own frame and range, so the
    /// interpreter never reads outside them.
    fn check_functions(&self) -> Result<()> {
        for f in self.funcs.iter().filter(|f| f.kind == FuncKind::VMFunc) {
            if f.end_instr > self.instrs.len() {
                crate::bail_value!(
                    "function `{}` ends at instruction {} but there are {}",
                    f.name,
                    f.end_instr,
                    self.instrs.len()
                );
            }
            let regs = f.register_file_size;
            let check_reg = |r: Reg, pc: usize| -> Result<()> {
                if let Reg::Slot(s) = r {
                    if s >= regs {
                        crate::bail_value!(
                            "instruction {pc} of `{}` uses register {s}, but the function has {regs}",
                            f.name
                        );
                    }
                }
                Ok(())
            };
            let check_target = |pc: usize, off: i64| -> Result<()> {
                let t = pc as i128 + off as i128;
                if t < f.start_instr as i128 || t >= f.end_instr as i128 {
                    crate::bail_value!(
                        "instruction {pc} of `{}` jumps to {t}, outside the function [{}, {})",
                        f.name,
                        f.start_instr,
                        f.end_instr
                    );
                }
                Ok(())
            };
            for pc in f.start_instr..f.end_instr {
                match &self.instrs[pc] {
                    Instr::Call {
                        dst,
                        args_start,
                        args_len,
                        ..
                    } => {
                        if let Some(d) = dst {
                            check_reg(Reg::Slot(*d), pc)?;
                        }
                        for a in &self.call_args[*args_start..args_start + args_len] {
                            if let Arg::Reg(r) = a {
                                check_reg(*r, pc)?;
                            }
                        }
                    }
                    Instr::Ret(r) => check_reg(*r, pc)?,
                    Instr::Goto(off) => {
                        // Relax has no loops: TVM only jumps forward (to the join after an
                        // If), and refusing anything else means no executable can spin.
                        if *off <= 0 {
                            crate::bail_value!(
                                "instruction {pc} of `{}` has Goto offset {off} (must be > 0)",
                                f.name
                            );
                        }
                        check_target(pc, *off)?
                    }
                    Instr::If { cond, false_offset } => {
                        check_reg(*cond, pc)?;
                        if *false_offset <= 1 {
                            crate::bail_value!(
                                "instruction {pc} of `{}` has If false offset {false_offset} \
                                 (must be > 1)",
                                f.name
                            );
                        }
                        check_target(pc, 1)?;
                        check_target(pc, *false_offset)?;
                    }
                }
            }
        }
        Ok(())
    }

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

    /// TVM's statistics text (`VMExecutable::Stats`).
    pub fn stats(&self) -> String {
        let mut s = String::from("Relax VM executable statistics:\n");
        let items: Vec<String> = self.constants.iter().map(constant_summary).collect();
        let _ = writeln!(
            s,
            "  Constant pool (# {}): [{}]",
            self.constants.len(),
            items.join(", ")
        );
        let names: Vec<&str> = self.funcs.iter().map(|f| f.name.as_str()).collect();
        let _ = writeln!(s, "  Globals (#{}): [{}]", names.len(), names.join(", "));
        s
    }

    fn arg_text(&self, a: &Arg) -> String {
        match a {
            Arg::Reg(r) => reg_text(*r),
            Arg::Imm(v) => format!("i{v}"),
            Arg::Const(c) => format!("c[{c}]"),
            Arg::Func(f) => format!("f[{}]", self.funcs[*f].name),
        }
    }

    /// TVM's bytecode listing (`VMExecutable::AsText`).
    pub fn as_text(&self) -> String {
        let mut os = String::new();
        for f in &self.funcs {
            match f.kind {
                FuncKind::PackedFunc => {
                    let _ = write!(os, "@{} packed_func;\n\n", f.name);
                    continue;
                }
                FuncKind::VMTIRFunc => {
                    let _ = write!(os, "@{} num_inputs={} vm_tir_func;\n\n", f.name, f.num_args);
                    continue;
                }
                FuncKind::VMFunc => {}
            }
            let _ = writeln!(os, "@{}:", f.name);
            for pc in f.start_instr..f.end_instr {
                os.push_str("  ");
                match &self.instrs[pc] {
                    Instr::Call {
                        func,
                        args_start,
                        args_len,
                        ..
                    } => {
                        let args: Vec<String> = self.call_args[*args_start..args_start + args_len]
                            .iter()
                            .map(|a| self.arg_text(a))
                            .collect();
                        // The destination is printed from the raw word (a special register
                        // shows as %void / %vm).
                        let off = self.instr_offset[pc] as usize;
                        let dst = raw_reg_text(self.instr_data[off + 1]);
                        let _ = writeln!(
                            os,
                            "{:<6}{:<16} in: {:<12} dst: {}",
                            "call",
                            self.funcs[*func].name,
                            args.join(", "),
                            dst
                        );
                    }
                    Instr::Ret(r) => {
                        let _ = writeln!(os, "{:<6}{}", "ret ", reg_text(*r));
                    }
                    Instr::Goto(off) => {
                        let _ = writeln!(os, "{:<6}{}", "goto", off);
                    }
                    Instr::If { cond, false_offset } => {
                        let _ = writeln!(os, "{:<6}{}, {}", "If", reg_text(*cond), false_offset);
                    }
                }
            }
            os.push('\n');
        }
        os
    }
}

fn reg_text(r: Reg) -> String {
    match r {
        Reg::Slot(s) => format!("%{s}"),
        Reg::Void => "%void".into(),
        Reg::Vm => "%vm".into(),
    }
}

fn raw_reg_text(v: i64) -> String {
    match v {
        VOID_REG => "%void".into(),
        VM_REG => "%vm".into(),
        v => format!("%{v}"),
    }
}

fn constant_summary(c: &Any) -> String {
    let v = c.view();
    match v.type_index() {
        crate::abi::type_index::TENSOR => {
            let t = v
                .as_object()
                .and_then(|o| Tensor::from_object(o).ok())
                .map(|t| t.shape().to_vec())
                .unwrap_or_default();
            if t.is_empty() {
                "scalar".into()
            } else {
                format!("[{}]", join_i64(&t))
            }
        }
        crate::abi::type_index::SHAPE => {
            let dims = v
                .as_object()
                .and_then(|o| shape_dims(&o).map(<[i64]>::to_vec))
                .unwrap_or_default();
            format!("shapetuple[{}]", join_i64(&dims))
        }
        crate::abi::type_index::DATA_TYPE => v
            .as_dtype()
            .and_then(|d| dtype_to_string(d).ok())
            .unwrap_or_default(),
        crate::abi::type_index::INT => v.as_i64().unwrap_or_default().to_string(),
        crate::abi::type_index::FLOAT => v.as_f64().unwrap_or_default().to_string(),
        _ => match v.as_str() {
            Some(s) => format!("\"{s}\""),
            None => v.type_name().to_string(),
        },
    }
}

fn join_i64(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// The module of kind `relax.VMExecutable`.
pub struct ExecutableModule {
    exec: std::sync::Arc<Executable>,
}

impl ExecutableModule {
    /// Wraps a decoded executable.
    pub fn new(exec: Executable) -> ExecutableModule {
        ExecutableModule {
            exec: std::sync::Arc::new(exec),
        }
    }

    /// The decoded executable.
    pub fn executable(&self) -> &std::sync::Arc<Executable> {
        &self.exec
    }
}

/// Loads an executable module from bytes (`ffi.Module.load_from_bytes.relax.VMExecutable`).
pub fn load_executable(bytes: &[u8]) -> Result<Module> {
    Ok(Module::new(ExecutableModule::new(Executable::from_bytes(
        bytes,
    )?)))
}

impl ModuleKind for ExecutableModule {
    fn kind(&self) -> &str {
        "relax.VMExecutable"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let exec = self.exec.clone();
        let keep = this.clone();
        let f = match name {
            "stats" => Function::from_fn(move |_| Ok(Any::from(exec.stats()))),
            "as_text" => Function::from_fn(move |_| Ok(Any::from(exec.as_text()))),
            "has_function" => Function::from_fn(move |args: &[AnyView<'_>]| {
                let n = first_str(args, "name")?;
                Ok(Any::from(exec.func_map.contains_key(n)))
            }),
            "vm_load_executable" => {
                Function::from_fn(move |_| Ok(Any::from(super::interp::load_vm(&keep)?)))
            }
            #[cfg(feature = "profiling")]
            "vm_profiler_load_executable" => {
                Function::from_fn(move |_| Ok(Any::from(super::interp::load_profiler_vm(&keep)?)))
            }
            _ => return Ok(None),
        };
        Ok(Some(f))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        matches!(
            name,
            "stats" | "as_text" | "has_function" | "vm_load_executable"
        ) || (cfg!(feature = "profiling") && name == "vm_profiler_load_executable")
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        // Loading keeps the exact bytes, so saving is the inverse of loading.
        Ok(self.exec.bytes().to_vec())
    }

    /// Binary-serializable, as TVM's `VMExecutable`.
    fn property_mask(&self) -> i32 {
        1
    }

    /// The saved bytes, as a file (TVM's `VMExecutable::WriteToFile`, any format).
    fn write_to_file(&self, path: &str, _format: &str) -> Result<()> {
        std::fs::write(path, self.exec.bytes())
            .map_err(|e| Error::runtime(format!("cannot write `{path}`: {e}")))
    }
}

fn first_str<'a>(args: &'a [AnyView<'_>], what: &str) -> Result<&'a str> {
    args.first()
        .ok_or_else(|| Error::type_error(format!("missing argument `{what}`")))?
        .expect_str(what)
}
