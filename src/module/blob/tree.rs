//! The decoded module tree ([`DecodedBlob`]): its modules, who imports whom, and the checks
//! every layout shares (indices in range, the root first, no cycles).

use std::borrow::Cow;

use super::{context, BlobLayout, IMPORT_TREE_KEY, LIB_KEY};
use crate::error::Result;

/// One module entry in a blob: its type key and (for non-`_lib`) its payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobModule<'a> {
    /// The module's type key (`relax.VMExecutable`, `examplejson`, ...) or [`LIB_KEY`].
    pub kind: String,
    /// What the module saved of itself; `None` exactly for `_lib`. Decoding borrows it from
    /// the blob (a model's weights are not copied to be handed to its loader).
    pub payload: Option<Cow<'a, [u8]>>,
}

impl BlobModule<'_> {
    /// The `_lib` placeholder: the library module the blob is embedded in.
    pub fn library() -> Self {
        BlobModule {
            kind: LIB_KEY.to_string(),
            payload: None,
        }
    }

    /// A serialized module of type `kind`.
    pub fn serialized(kind: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        BlobModule {
            kind: kind.into(),
            payload: Some(Cow::Owned(payload.into())),
        }
    }

    /// Whether this entry is the `_lib` placeholder.
    pub fn is_library(&self) -> bool {
        self.kind == LIB_KEY
    }
}

/// A decoded blob: modules in index order (0 = root) and for each module the indices it imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedBlob<'a> {
    /// The layout it was read from, and the one [`encode`](super::encode()) writes.
    pub layout: BlobLayout,
    /// The modules; index 0 is the root.
    pub modules: Vec<BlobModule<'a>>,
    /// `imports[i]` lists, in order, the modules that module `i` imports.
    pub imports: Vec<Vec<usize>>,
}

impl<'a> DecodedBlob<'a> {
    /// The legacy shape: the library module as root, importing each of `modules` in order.
    pub fn legacy(modules: Vec<BlobModule<'a>>) -> Self {
        let n = modules.len();
        let mut all = Vec::with_capacity(n + 1);
        all.push(BlobModule::library());
        all.extend(modules);
        let mut imports = vec![Vec::new(); n + 1];
        imports[0] = (1..=n).collect();
        DecodedBlob {
            layout: BlobLayout::ClassicLegacy,
            modules: all,
            imports,
        }
    }

    /// The root module (index 0).
    pub fn root(&self) -> Option<&BlobModule<'a>> {
        self.modules.first()
    }

    /// Indices of the `_lib` entries. TVM creates one library module per entry (its writers
    /// emit at most one, its readers accept several).
    pub fn library_indices(&self) -> Vec<usize> {
        (0..self.modules.len())
            .filter(|&i| self.modules[i].is_library())
            .collect()
    }

    /// The import lists as TVM's CSR pair `(indptr, child_indices)`.
    pub fn import_csr(&self) -> (Vec<u64>, Vec<u64>) {
        let mut indptr = Vec::with_capacity(self.imports.len() + 1);
        let mut children = Vec::new();
        indptr.push(0);
        for row in &self.imports {
            children.extend(row.iter().map(|&c| c as u64));
            indptr.push(children.len() as u64);
        }
        (indptr, children)
    }

    /// Checks what every loader relies on: at least one module, one import list per module,
    /// well-formed keys, a payload exactly for non-`_lib` modules, import indices in range and
    /// no import cycle.
    pub fn validate(&self) -> Result<()> {
        self.check_structure()
            .map_err(|e| context(e, "invalid module tree"))
    }

    fn check_structure(&self) -> Result<()> {
        if self.modules.is_empty() {
            crate::bail_value!("it has no modules; module 0 must be the root");
        }
        if self.imports.len() != self.modules.len() {
            crate::bail_value!(
                "it has {} import lists for {} modules",
                self.imports.len(),
                self.modules.len()
            );
        }
        for (i, m) in self.modules.iter().enumerate() {
            if m.kind.is_empty() {
                crate::bail_value!("module {i} has an empty type key");
            }
            if m.kind == IMPORT_TREE_KEY {
                crate::bail_value!("module {i} uses the reserved key `{IMPORT_TREE_KEY}`");
            }
            match (m.is_library(), &m.payload) {
                (true, Some(_)) => {
                    crate::bail_value!("module {i} is `{LIB_KEY}` but has a payload")
                }
                (false, None) => crate::bail_value!("module {i} (`{}`) has no payload", m.kind),
                _ => {}
            }
        }
        for (i, row) in self.imports.iter().enumerate() {
            if let Some(&c) = row.iter().find(|&&c| c >= self.modules.len()) {
                crate::bail_value!(
                    "module {i} imports module {c}, but there are only {} modules",
                    self.modules.len()
                );
            }
        }
        check_acyclic(&self.modules, &self.imports)
    }

    pub(super) fn is_legacy_shape(&self) -> bool {
        let n = self.modules.len();
        n >= 1
            && self.modules[0].is_library()
            && self.imports.len() == n
            && self.imports[0].iter().copied().eq(1..n)
            && self.imports[1..].iter().all(Vec::is_empty)
    }
}

/// Turns TVM's CSR import tree into per-module import lists, checking it fully first
/// (ProcessLibraryBin / ProcessModuleBlob index it unchecked).
pub(super) fn imports_from_csr(
    indptr: &[u64],
    children: &[u64],
    modules: usize,
) -> Result<Vec<Vec<usize>>> {
    if indptr.len() != modules + 1 {
        crate::bail_value!(
            "indptr has {} entries, but {modules} modules need {}",
            indptr.len(),
            modules + 1
        );
    }
    if indptr[0] != 0 {
        crate::bail_value!("indptr[0] is {}, not 0", indptr[0]);
    }
    for i in 1..indptr.len() {
        if indptr[i] < indptr[i - 1] {
            crate::bail_value!(
                "indptr decreases: indptr[{i}] = {} after indptr[{}] = {}",
                indptr[i],
                i - 1,
                indptr[i - 1]
            );
        }
    }
    let last = indptr[modules];
    if last != children.len() as u64 {
        crate::bail_value!(
            "last indptr entry is {last}, but there are {} child indices",
            children.len()
        );
    }
    let mut imports = Vec::with_capacity(modules);
    for i in 0..modules {
        // In range: non-decreasing and ending at children.len().
        let (start, end) = (indptr[i] as usize, indptr[i + 1] as usize);
        let mut row = Vec::with_capacity(end - start);
        for (j, &c) in children[start..end].iter().enumerate() {
            if c >= modules as u64 {
                crate::bail_value!(
                    "child index {c} (child_indices[{}], an import of module {i}) is out of \
                     range for {modules} modules",
                    start + j
                );
            }
            row.push(c as usize);
        }
        imports.push(row);
    }
    Ok(imports)
}

/// Fails on an import cycle. TVM's readers would build it (a reference cycle that leaks, and a
/// lookup through imports that never ends); its writers order modules so a module's imports
/// always have larger indices, so no real blob has one. Import indices must be in range.
pub(super) fn check_acyclic(modules: &[BlobModule], imports: &[Vec<usize>]) -> Result<()> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let name = |i: usize| format!("module {i} (`{}`)", modules[i].kind);
    let mut state = vec![NEW; imports.len()];
    // Iterative DFS (a chain of modules may be long): (module, next import to visit).
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..imports.len() {
        if state[start] != NEW {
            continue;
        }
        state[start] = ON_PATH;
        path.push((start, 0));
        while let Some(top) = path.last_mut() {
            let (node, next) = *top;
            let Some(&child) = imports[node].get(next) else {
                state[node] = DONE;
                path.pop();
                continue;
            };
            top.1 += 1;
            match state[child] {
                NEW => {
                    state[child] = ON_PATH;
                    path.push((child, 0));
                }
                ON_PATH if child == node => {
                    crate::bail_value!("import cycle: {} imports itself", name(node));
                }
                ON_PATH => {
                    let from = path.iter().position(|&(m, _)| m == child).unwrap_or(0);
                    let cycle: Vec<String> = path[from..]
                        .iter()
                        .map(|&(m, _)| name(m))
                        .chain(std::iter::once(name(child)))
                        .collect();
                    crate::bail_value!("import cycle: {}", cycle.join(" -> "));
                }
                _ => {}
            }
        }
    }
    Ok(())
}
