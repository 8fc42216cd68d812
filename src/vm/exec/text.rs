//! The executable as text: TVM's `Stats` and `AsText`.

use std::fmt::Write as _;

use crate::dtype::dtype_to_string;
use crate::object::shape::shape_dims;
use crate::tensor::Tensor;
use crate::value::Any;

use super::*;

impl Executable {
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
