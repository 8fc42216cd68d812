//! Reading and checking the serialized executable (`Executable::from_bytes`).

use std::collections::HashMap;

use crate::abi::DLDataType;
use crate::dtype::dtype;
use crate::error::{Error, Result};
use crate::module::blob::Reader;
use crate::object::shape::new_shape;
use crate::value::Any;

use super::*;

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
}
