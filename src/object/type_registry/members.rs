//! What is registered on a type after it exists: fields, methods, metadata and attributes.

use std::cell::UnsafeCell;

use crate::abi::{type_index as ti, TVMFFIAny};
use crate::error::{Error, Result};
use crate::object::ObjectRef;
use crate::value::AnyView;

use super::table::*;
use super::*;

impl Table {
    /// Keeps an owned copy of a borrowed value and returns a raw view of it.
    pub(super) fn keep_value(&mut self, value: AnyView<'_>) -> TVMFFIAny {
        let owned = value.to_owned_any();
        let raw = *owned.raw();
        self.values.push(owned);
        raw
    }

    pub(super) fn register_field(
        &mut self,
        index: i32,
        info: &TVMFFIFieldInfo,
        name: &[u8],
    ) -> Result<()> {
        let entry = self.entry(index)?;
        if entry.fields.items.iter().any(|f| {
            // SAFETY: field names were copied into the table's storage.
            let existing = unsafe { f.name.as_slice() };
            existing == name
        }) {
            return Err(Error::value(format!(
                "duplicate field name `{}` in type `{}`",
                String::from_utf8_lossy(name),
                entry.key
            )));
        }
        let mut data = *info;
        if data.flags & field_flag::SETTER_IS_FUNCTION_OBJ != 0 && !data.setter.is_null() {
            // The setter is a function object: keep it alive as long as the record.
            // SAFETY: the caller passes a live function object as the setter.
            if let Some(obj) = unsafe { ObjectRef::from_raw_borrowed(data.setter) } {
                self.setters.push(obj);
            }
        }
        data.default_value_or_factory = if data.flags & field_flag::HAS_DEFAULT != 0 {
            // SAFETY: the caller guarantees the default value is a valid borrowed value.
            let view = unsafe { AnyView::from_raw(info.default_value_or_factory) };
            self.keep_value(view)
        } else {
            TVMFFIAny::NONE
        };
        data.name = keep_bytes(&mut self.strings, name);
        // SAFETY: the caller guarantees the byte arrays are readable.
        let (doc, metadata) = unsafe { (info.doc.as_slice(), info.metadata.as_slice()) };
        data.doc = keep_bytes(&mut self.strings, doc);
        data.metadata = keep_bytes(&mut self.strings, metadata);
        let entry = self.entry_mut(index)?;
        entry.fields.update(|v| v.push(data));
        let (ptr, n) = (entry.fields.ptr(), entry.fields.items.len() as i32);
        let info = entry.info_mut();
        info.fields = ptr;
        info.num_fields = n;
        Ok(())
    }

    pub(super) fn register_method(&mut self, index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
        self.entry(index)?;
        let mut data = *info;
        // SAFETY: the caller guarantees the record's byte arrays and value are valid.
        let (name, doc, metadata, method) = unsafe {
            (
                info.name.as_slice(),
                info.doc.as_slice(),
                info.metadata.as_slice(),
                AnyView::from_raw(info.method),
            )
        };
        data.name = keep_bytes(&mut self.strings, name);
        data.doc = keep_bytes(&mut self.strings, doc);
        data.metadata = keep_bytes(&mut self.strings, metadata);
        data.method = self.keep_value(method);
        let entry = self.entry_mut(index)?;
        entry.methods.update(|v| v.push(data));
        let (ptr, n) = (entry.methods.ptr(), entry.methods.items.len() as i32);
        let info = entry.info_mut();
        info.methods = ptr;
        info.num_methods = n;
        Ok(())
    }

    pub(super) fn register_metadata(
        &mut self,
        index: i32,
        md: &TVMFFITypeMetadata,
        doc: &[u8],
    ) -> Result<()> {
        let entry = self.entry(index)?;
        if entry.metadata.is_some() {
            return Err(Error::runtime(format!(
                "type metadata of `{}` is already registered (two registrations of the same \
                 type, or another type with the same key)",
                entry.key
            )));
        }
        let mut data = *md;
        data.doc = keep_bytes(&mut self.strings, doc);
        let entry = self.entry_mut(index)?;
        let boxed = Box::new(data);
        let ptr: *const TVMFFITypeMetadata = &*boxed;
        entry.metadata = Some(boxed);
        entry.info_mut().metadata = ptr;
        Ok(())
    }

    pub(super) fn column(&mut self, name: &str) -> usize {
        if let Some(&i) = self.column_by_name.get(name) {
            return i;
        }
        self.columns.push(Box::new(AttrColumn {
            cell: UnsafeCell::new(TVMFFITypeAttrColumn {
                data: std::ptr::null(),
                size: 0,
                begin_index: 0,
            }),
            data: Published::new(),
        }));
        let i = self.columns.len() - 1;
        self.column_by_name.insert(name.to_string(), i);
        i
    }

    pub(super) fn register_attr(
        &mut self,
        index: i32,
        name: &str,
        value: AnyView<'_>,
    ) -> Result<()> {
        if index != ti::NONE {
            // Checked before the column is created so a bad index leaves no trace.
            self.entry(index)?;
        }
        let col = self.column(name);
        if index == ti::NONE {
            // tvm-ffi's sentinel: only make sure the column exists.
            return Ok(());
        }
        let slot = index as usize;
        let current = &self.columns[col].data.items;
        if current.get(slot).is_some_and(|v| v.type_index != ti::NONE) {
            return Err(Error::runtime(format!(
                "type attribute `{name}` is already registered for type index {index}"
            )));
        }
        let raw = self.keep_value(value);
        let column = &mut self.columns[col];
        column.data.update(|items| {
            if items.len() <= slot {
                items.resize(slot + 1, TVMFFIAny::NONE);
            }
            items[slot] = raw;
        });
        let (ptr, size) = (column.data.ptr(), column.data.items.len() as i32);
        let cell = column.cell.get_mut();
        cell.data = ptr;
        cell.size = size;
        cell.begin_index = 0;
        Ok(())
    }
}
