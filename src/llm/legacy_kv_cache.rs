//! The contiguous KV cache of early Relax LLM examples (TVM `lm_support.cc`,
//! `relax.vm.AttentionKVCacheLegacy`): one growing tensor per cache whose first dimension
//! counts tokens, appended to, overwritten as a sliding window (with attention sinks), viewed,
//! popped and cleared, as `vm.builtin.attention_kv_cache_*` do.

use super::args::Args;
use super::guarded::Guarded;
use crate::error::Result;
use crate::function::Function;
use crate::object::containers::array::array_items;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

struct Inner {
    data: Tensor,
    fill_count: i64,
    window_pos: i64,
}

/// A legacy KV cache object.
pub struct LegacyKvCache {
    inner: Guarded<Inner>,
}

// SAFETY: no public cell; the state is behind a mutex. The index is registered once under
// `relax.vm.AttentionKVCacheLegacy`.
unsafe impl ObjectPayload for LegacyKvCache {
    const TYPE_INDEX: i32 = crate::abi::type_index::OBJECT;
    fn type_index() -> i32 {
        super::types::legacy_kv_cache()
    }
}

// The payload is shared between threads (the safety claim above): checked here.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<LegacyKvCache>();
};

fn elem_bytes(t: &Tensor) -> i64 {
    crate::dtype::element_bytes(t.dtype()) as i64
}

impl Inner {
    fn row_elems(&self, value: &Tensor, what: &str) -> Result<i64> {
        let (d, v) = (self.data.shape(), value.shape());
        if d.len() != v.len() {
            crate::bail_value!(
                "{what}: the value has {} dims, the cache {}",
                v.len(),
                d.len()
            );
        }
        for i in 1..d.len() {
            if v[i] != d[i] {
                crate::bail_value!("Dimension {i} mismatch");
            }
        }
        Ok(d[1..].iter().product())
    }

    fn check_value(&self, value: &Tensor) -> Result<()> {
        if self.data.dtype() != value.dtype() {
            crate::bail_type!("dtype mismatch");
        }
        if !value.is_contiguous() {
            crate::bail_value!("the value is not contiguous");
        }
        if value.ndim() == 0 {
            crate::bail_value!("the value needs a token dimension");
        }
        Ok(())
    }

    /// Grows the reserved rows (doubling) to hold `need` rows.
    fn reserve(&mut self, need: i64) -> Result<()> {
        let mut rows = self.data.shape()[0].max(1);
        while need > rows {
            rows *= 2;
        }
        if rows != self.data.shape()[0] {
            let mut shape = self.data.shape().to_vec();
            shape[0] = rows;
            let bigger = Tensor::empty(&shape, self.data.dtype(), self.data.device())?;
            bigger
                .view(self.data.shape(), self.data.dtype(), 0)?
                .copy_from(&self.data)?;
            self.data = bigger;
        }
        Ok(())
    }

    /// Copies `rows` rows of `value` from row `from` into the cache at row `to`.
    fn copy_rows(&self, value: &Tensor, from: i64, to: i64, rows: i64, row: i64) -> Result<()> {
        let mut shape = value.shape().to_vec();
        shape[0] = rows;
        let eb = elem_bytes(value);
        let src = value.view(&shape, value.dtype(), (from * row * eb) as u64)?;
        let dst = self
            .data
            .view(&shape, self.data.dtype(), (to * row * eb) as u64)?;
        dst.copy_from(&src)
    }

    fn append(&mut self, value: &Tensor) -> Result<()> {
        self.check_value(value)?;
        let n = value.shape()[0];
        self.reserve(self.fill_count + n)?;
        let row = self.row_elems(value, "append")?;
        self.copy_rows(value, 0, self.fill_count, n, row)?;
        self.fill_count += n;
        Ok(())
    }

    fn update(&mut self, value: &Tensor) -> Result<()> {
        self.check_value(value)?;
        if value.shape()[0] != self.fill_count {
            crate::bail_value!("Requested shape do not match the filled count");
        }
        let row = self.row_elems(value, "update")?;
        self.copy_rows(value, 0, 0, value.shape()[0], row)?;
        self.fill_count = value.shape()[0];
        Ok(())
    }

    fn window_override(&mut self, value: &Tensor, max: i64, sinks: i64) -> Result<()> {
        self.check_value(value)?;
        let n = value.shape()[0];
        if n > max - sinks {
            crate::bail_value!("dim 0 of value too large");
        }
        if self.fill_count + n <= max {
            self.reserve(self.fill_count + n)?;
        }
        let row = self.row_elems(value, "window override")?;
        let first = n.min(max - self.window_pos);
        let at = self.window_pos;
        self.fill_count = (self.fill_count + n).min(max);
        self.window_pos = (self.window_pos + n).min(max);
        if first > 0 {
            self.copy_rows(value, 0, at, first, row)?;
        }
        if first < n {
            // The rest wraps around to just after the sinks.
            self.copy_rows(value, first, sinks, n - first, row)?;
            self.window_pos = n - first + sinks;
        }
        Ok(())
    }

    fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let d = self.data.shape();
        if shape.first() != Some(&self.fill_count) {
            crate::bail_value!("Requested shape do not match the filled count");
        }
        if shape.len() != d.len() {
            crate::bail_value!("the view has {} dims, the cache {}", shape.len(), d.len());
        }
        for i in 1..d.len() {
            if shape[i] != d[i] {
                crate::bail_value!("Dimension {i} mismatch");
            }
        }
        self.data.view(shape, self.data.dtype(), 0)
    }
}

fn cache_arg<'o>(args: &Args<'_, '_>, obj: &'o ObjectRef) -> Result<&'o LegacyKvCache> {
    obj.downcast_ref::<LegacyKvCache>().ok_or_else(|| {
        args.get(0).type_mismatch(
            &format!("{} argument 0 (cache)", args.func()),
            "relax.vm.AttentionKVCacheLegacy",
        )
    })
}

fn each_cache(args: &Args<'_, '_>, f: impl Fn(&mut Inner) -> Result<()>) -> Result<()> {
    let arr = args.array(0, "caches")?;
    let items = array_items(&arr).unwrap_or(&[]);
    let mut caches = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        let obj = v.expect_object(&format!("{} item {i}", args.func()))?;
        if obj.downcast_ref::<LegacyKvCache>().is_none() {
            return Err(v.type_mismatch(
                &format!("{} item {i}", args.func()),
                "relax.vm.AttentionKVCacheLegacy",
            ));
        }
        caches.push(obj);
    }
    for obj in &caches {
        f(&mut *obj
            .downcast_ref::<LegacyKvCache>()
            .unwrap()
            .inner
            .lock("KV cache")?)?;
    }
    Ok(())
}

/// A global taking a cache and returning it after `f` changes it.
fn updating(
    name: &'static str,
    count: usize,
    f: fn(&mut Inner, &Args<'_, '_>) -> Result<()>,
) -> (&'static str, Function) {
    (
        name,
        Function::from_fn(move |raw: &[AnyView<'_>]| {
            let args = Args::exact(name, raw, count)?;
            let obj = args.object(0, "cache")?;
            f(&mut *cache_arg(&args, &obj)?.inner.lock("KV cache")?, &args)?;
            Ok(Any::from_object(obj))
        }),
    )
}

/// `vm.builtin.attention_kv_cache_{create, update, append, window_override*, view,
/// array_popn, array_clear}`.
pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "vm.builtin.attention_kv_cache_create",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.attention_kv_cache_create", raw, 3)?;
                let init = args.tensor(0, "init_data")?;
                let reserve = args.shape(1, "reserve_shape")?;
                let init_fill_count = args.i64(2, "init_fill_count")?;
                let mut inner = Inner {
                    data: Tensor::empty(&reserve, init.dtype(), init.device())?,
                    fill_count: 0,
                    window_pos: 0,
                };
                inner.append(&init)?;
                if init_fill_count >= 0 {
                    inner.fill_count = init_fill_count;
                    inner.window_pos = init_fill_count;
                }
                Ok(Any::from_object(new_object(LegacyKvCache {
                    inner: Guarded::new(inner),
                })))
            }),
        ),
        updating("vm.builtin.attention_kv_cache_update", 2, |c, a| {
            c.update(&a.tensor(1, "value")?)
        }),
        updating("vm.builtin.attention_kv_cache_append", 2, |c, a| {
            c.append(&a.tensor(1, "value")?)
        }),
        updating(
            "vm.builtin.attention_kv_cache_window_override",
            3,
            |c, a| c.window_override(&a.tensor(1, "value")?, a.i64(2, "max_cache_size")?, 0),
        ),
        updating(
            "vm.builtin.attention_kv_cache_window_override_with_sinks",
            4,
            |c, a| {
                c.window_override(
                    &a.tensor(1, "value")?,
                    a.i64(2, "max_cache_size")?,
                    a.i64(3, "num_attention_sinks")?,
                )
            },
        ),
        (
            "vm.builtin.attention_kv_cache_view",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::between("vm.builtin.attention_kv_cache_view", raw, 1, 2)?;
                let obj = args.object(0, "cache")?;
                let c = cache_arg(&args, &obj)?.inner.lock("KV cache")?;
                let shape = if args.len() == 2 {
                    args.shape(1, "shape")?
                } else {
                    let mut s = c.data.shape().to_vec();
                    s[0] = c.fill_count;
                    s
                };
                Ok(Any::from(c.view(&shape)?))
            }),
        ),
        (
            "vm.builtin.attention_kv_cache_array_popn",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.attention_kv_cache_array_popn", raw, 2)?;
                let n = args.i64(1, "n")?;
                if n < 0 {
                    crate::bail_value!("attention_kv_cache_array_popn: n must not be negative");
                }
                // All caches are checked before any changes.
                each_cache(&args, |c| {
                    if n > c.fill_count {
                        crate::bail_value!(
                            "Check failed: n <= fill_count ({n} vs {})",
                            c.fill_count
                        );
                    }
                    Ok(())
                })?;
                each_cache(&args, |c| {
                    c.fill_count -= n;
                    Ok(())
                })?;
                Ok(Any::none())
            }),
        ),
        (
            "vm.builtin.attention_kv_cache_array_clear",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.attention_kv_cache_array_clear", raw, 1)?;
                each_cache(&args, |c| {
                    c.fill_count = 0;
                    c.window_pos = 0;
                    Ok(())
                })?;
                Ok(Any::none())
            }),
        ),
    ]
}
