//! The operators and delegate backends a method may use.

use crate::delegate::Backend;
use crate::error::{self, Error};
use crate::format::{fb, Program};
use crate::kernel_api::KernelDef;

/// Operators plus delegate backends available to a method.
#[derive(Clone, Copy)]
pub struct Registry<'r> {
    /// Kernel tables, searched in order (the first match wins).
    pub kernels: &'r [&'r [KernelDef]],
    pub backends: &'r [&'r dyn Backend],
}

impl Registry<'static> {
    /// The portable kernel library and no backends.
    pub fn portable() -> Registry<'static> {
        Registry {
            kernels: crate::kernels::KERNELS,
            backends: &[],
        }
    }
}

/// Every backend ptera ships.
pub static BACKENDS: &[&dyn Backend] = &[
    &crate::delegate::xnnpack::BACKEND,
    &crate::delegate::ptera::BACKEND,
];

/// [`BACKENDS`] with the XNNPACK backend that packs fp32 filters at load.
pub static BACKENDS_PACKING: &[&dyn Backend] = &[
    &crate::delegate::xnnpack::BACKEND_PACKING,
    &crate::delegate::ptera::BACKEND,
];

impl Registry<'static> {
    /// The portable kernel library and every backend ptera ships (`XnnpackBackend`), every
    /// weight read in place from the program: the least RAM (what a board running from flash
    /// wants).
    pub fn standard() -> Registry<'static> {
        Registry {
            kernels: crate::kernels::KERNELS,
            backends: BACKENDS,
        }
    }

    /// Like [`standard`](Self::standard), but the XNNPACK regions' fp32 fully-connected and
    /// convolution filters are packed once at load into the method's metadata buffer
    /// ([`XnnpackBackend::PACKING`](crate::delegate::xnnpack::XnnpackBackend::PACKING)): about
    /// the filters' size more RAM, no weight packing per forward (ExecuTorch's XNNPACK
    /// delegate does the same). Programs lowered by `xtask lower` are packed already.
    pub fn packing() -> Registry<'static> {
        Registry {
            kernels: crate::kernels::KERNELS,
            backends: BACKENDS_PACKING,
        }
    }
}

impl<'r> Registry<'r> {
    /// Looks up `name` + `overload` (joined with '.', or just `name` when the overload is empty).
    pub fn kernel(&self, name: &str, overload: &str) -> Option<&'r KernelDef> {
        self.kernels
            .iter()
            .flat_map(|t| t.iter())
            .find(|k| key_matches(k.name, name, overload))
    }

    /// The backend of delegate `d` and its processed payload (inline or from a segment).
    pub fn delegate<'p>(
        &self,
        program: &Program<'p>,
        d: usize,
        del: fb::BackendDelegate<'p>,
    ) -> Result<(&'r dyn Backend, &'p [u8]), Error> {
        let id = del.id().ok_or(Error::MissingField {
            table: "BackendDelegate",
            field: "id",
            index: d,
        })?;
        let backend = self.backend(id).ok_or_else(|| Error::UnknownBackend {
            delegate: d,
            backend: error::name(id),
        })?;
        let processed = del.processed().ok_or(Error::MissingField {
            table: "BackendDelegate",
            field: "processed",
            index: d,
        })?;
        Ok((backend, program.delegate_data(processed)?))
    }

    pub fn backend(&self, id: &str) -> Option<&'r dyn Backend> {
        self.backends.iter().copied().find(|b| b.id() == id)
    }
}

fn key_matches(key: &str, name: &str, overload: &str) -> bool {
    if overload.is_empty() {
        return key == name;
    }
    key.len() == name.len() + 1 + overload.len()
        && key.starts_with(name)
        && key.as_bytes()[name.len()] == b'.'
        && key.ends_with(overload)
}
