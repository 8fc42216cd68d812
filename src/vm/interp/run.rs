//! The interpreter: runs a VM function or closure, one register file per call (recycled
//! per thread), with a profiled copy of the loop for the profiler VM (`profiled`).

use std::ffi::c_void;
use std::sync::Arc;

use crate::abi::{type_index, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::closure::{closure_obj, ClosureImpl};
use super::state::{unsupported_tir, Callee, VmState};
use super::MAX_CALL_DEPTH;
use crate::vm::builtin;
use crate::vm::exec::{Arg, FuncKind, Instr, Reg};

impl VmState {
    /// Runs VM function `fidx` on `args`.
    pub fn invoke_func(&self, fidx: usize, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
        // Two copies of the interpreter: the one that runs when nothing is profiled has no
        // profiling code at all.
        #[cfg(feature = "profiling")]
        if self.profiling.load(std::sync::atomic::Ordering::Relaxed) {
            return self.run_func::<true>(fidx, args, depth);
        }
        self.run_func::<false>(fidx, args, depth)
    }

    /// The interpreter, with every call instruction timed when `PROFILE`.
    fn run_func<const PROFILE: bool>(
        &self,
        fidx: usize,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        let exec = &*self.exec;
        let f = &exec.funcs[fidx];
        if f.kind == FuncKind::VMTIRFunc {
            return Err(unsupported_tir(&f.name));
        }
        if f.kind != FuncKind::VMFunc {
            return Err(Error::new(
                "InternalError",
                format!(
                    "Cannot support closure with function kind {}",
                    match f.kind {
                        FuncKind::PackedFunc => 0,
                        FuncKind::VMFunc => 1,
                        FuncKind::VMTIRFunc => 2,
                    }
                ),
            ));
        }
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::runtime(format!(
                "VM call depth exceeds {MAX_CALL_DEPTH} while calling `{}` (unbounded recursion?)",
                f.name
            )));
        }
        if args.len() as i64 != f.num_args {
            let names = if f.param_names.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.param_names.join(", "))
            };
            return Err(Error::value(format!(
                "Invoking function {} expects {} arguments{names}, but {} arguments were provided.",
                f.name,
                f.num_args,
                args.len()
            )));
        }
        let mut frame = Frame::take();
        let Frame { regs, scratch } = &mut frame;
        regs.extend(args.iter().map(AnyView::to_owned_any));
        regs.resize_with(f.register_file_size, Any::none);
        let consts = &self.consts.0;
        let fvals = &self.func_values.0;
        let mut pc = f.start_instr;
        loop {
            // Jumps were checked to stay inside [start, end); falling off the end is not.
            if pc >= f.end_instr {
                return Err(Error::new(
                    "InternalError",
                    format!("run into invalid section: `{}` has no Ret", f.name),
                ));
            }
            match &exec.instrs[pc] {
                Instr::Call {
                    dst,
                    func,
                    args_start,
                    args_len,
                } => {
                    scratch.clear();
                    for a in &exec.call_args[*args_start..args_start + args_len] {
                        scratch.push(match *a {
                            Arg::Reg(Reg::Slot(s)) => *regs[s].raw(),
                            Arg::Reg(Reg::Void) => TVMFFIAny::NONE,
                            Arg::Reg(Reg::Vm) => self.vm_raw.0,
                            Arg::Imm(v) => Any::from(v).into_raw(),
                            Arg::Const(c) => *consts[c].raw(),
                            Arg::Func(i) => *fvals[i].raw(),
                        });
                    }
                    // SAFETY: `scratch` holds borrowed copies of registers, constants and pool
                    // entries, which all outlive this call (the registers change only after it
                    // returns); immediates and special registers own nothing.
                    let views = unsafe { AnyView::slice_from_raw(scratch.as_ptr(), scratch.len()) };
                    let ret = self.call_instr::<PROFILE>(*func, views, depth)?;
                    if let Some(d) = dst {
                        regs[*d] = ret;
                    }
                    pc += 1;
                }
                Instr::Ret(r) => {
                    return Ok(match r {
                        Reg::Slot(s) => std::mem::take(&mut regs[*s]),
                        Reg::Void => Any::none(),
                        Reg::Vm => Any::opaque_ptr(self as *const VmState as *mut c_void),
                    });
                }
                Instr::Goto(off) => {
                    pc = (pc as i64 + off) as usize;
                }
                Instr::If { cond, false_offset } => {
                    let v = match cond {
                        Reg::Slot(s) => {
                            let v = regs[*s].view();
                            v.as_i64().ok_or_else(|| {
                                Error::type_error(format!(
                                    "If condition: expected int, got {}",
                                    v.type_name()
                                ))
                            })?
                        }
                        _ => {
                            return Err(Error::type_error(
                                "If condition: expected int, got a special register",
                            ))
                        }
                    };
                    if v != 0 {
                        pc += 1;
                    } else {
                        pc = (pc as i64 + false_offset) as usize;
                    }
                }
            }
        }
    }

    /// A call instruction's call: timed by the profiler in the profiled copy of the loop.
    #[inline(always)]
    fn call_instr<const PROFILE: bool>(
        &self,
        idx: usize,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        #[cfg(feature = "profiling")]
        if PROFILE {
            return self.call_pool_profiled(idx, args, depth);
        }
        self.call_pool(idx, args, depth)
    }

    #[inline(always)]
    pub(super) fn call_pool(&self, idx: usize, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
        match &self.funcs[idx] {
            Callee::Native(b) => builtin::call(*b, Some(self), args, depth),
            Callee::Packed(f) => f.call(args),
            Callee::VmFunc(i) => self.invoke_func(*i, args, depth + 1),
            Callee::Unsupported(name) => Err(unsupported_tir(name)),
        }
    }

    /// Calls a closure or a function object (`InvokeClosurePacked`).
    pub fn invoke_closure(
        &self,
        obj: &ObjectRef,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        if obj.type_index() == type_index::FUNCTION {
            return Function::from_object(obj.clone())?.call(args);
        }
        let clo = closure_obj(obj).ok_or_else(|| {
            Error::new(
                "InternalError",
                format!(
                    "Function expects a closure or ffi::Function, got {}",
                    crate::value::type_name(obj.type_index())
                ),
            )
        })?;
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::runtime(format!(
                "VM call depth exceeds {MAX_CALL_DEPTH} while calling closure `{}`",
                clo.func_name
            )));
        }
        match &clo.imp {
            ClosureImpl::VmFunc { exec, index } => {
                let same = exec.upgrade().is_some_and(|e| Arc::ptr_eq(&e, &self.exec));
                if !same {
                    return Err(Error::value(format!(
                        "closure `{}` belongs to another VM executable",
                        clo.func_name
                    )));
                }
                self.invoke_func(*index, args, depth)
            }
            ClosureImpl::Bound {
                inner,
                last_args,
                discard_result,
            } => {
                let mut all: Vec<AnyView<'_>> = args.to_vec();
                all.extend(last_args.0.iter().map(Any::view));
                let out = self.invoke_closure(inner, &all, depth + 1)?;
                Ok(if *discard_result { Any::none() } else { out })
            }
        }
    }
}

/// A call's register file and argument buffer, recycled through a per-thread free list so a
/// call allocates nothing for them once warm (TVM keeps a frame free list per VM).
struct Frame {
    regs: Vec<Any>,
    scratch: Vec<TVMFFIAny>,
}

type FrameBuffers = (Vec<Any>, Vec<TVMFFIAny>);

thread_local! {
    static FREE_FRAMES: std::cell::RefCell<Vec<FrameBuffers>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Frame {
    fn take() -> Frame {
        let (regs, scratch) = FREE_FRAMES
            .try_with(|f| f.try_borrow_mut().ok().and_then(|mut f| f.pop()))
            .ok()
            .flatten()
            .unwrap_or_default();
        Frame { regs, scratch }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        // Released before touching the free list: dropping a value may run arbitrary code,
        // including another VM call on this thread.
        self.regs.clear();
        self.scratch.clear();
        let buffers = (
            std::mem::take(&mut self.regs),
            std::mem::take(&mut self.scratch),
        );
        let _ = FREE_FRAMES.try_with(|f| {
            if let Ok(mut f) = f.try_borrow_mut() {
                if f.len() < 64 {
                    f.push(buffers);
                }
            }
        });
    }
}
