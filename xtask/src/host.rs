//! What the host verbs share: reading a `.pte` into an aligned buffer, reading and checking
//! `.npy` inputs against a method's signature, synthesising inputs.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ptera::host::AlignedBuf;
use ptera::MethodMeta;

use crate::npy::HostTensor;

/// A model file's bytes: mapped (page-aligned, only the pages a run touches are resident), or
/// read into an aligned buffer where mapping is not possible (an empty file, a pipe).
pub enum ModelFile {
    Mapped(memmap2::Mmap),
    Read(AlignedBuf),
}

impl ModelFile {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            ModelFile::Mapped(m) => m,
            ModelFile::Read(b) => b.as_slice(),
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }
}

/// Maps `path` read-only (the runtime borrows weights in place, so a forward touches the file's
/// pages instead of a copy of them); reads it when it cannot be mapped.
pub fn load_file(path: &Path) -> Result<ModelFile> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let len = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len > 0 {
        // SAFETY: the map is private and read-only, and lives as long as the returned value;
        // the bytes are only read. Another process truncating the file while it is mapped
        // would fault the reader (SIGBUS): model files are not expected to change under a run.
        if let Ok(m) = unsafe { memmap2::MmapOptions::new().map(&f) } {
            return Ok(ModelFile::Mapped(m));
        }
    }
    Ok(ModelFile::Read(AlignedBuf::read(path).with_context(
        || format!("cannot read {}", path.display()),
    )?))
}

/// Bytes this host gives one method: `PTERA_MAX_MEMORY` (bytes) when set, else the memory
/// the kernel reports available, else no limit.
pub fn memory_budget() -> u64 {
    if let Some(v) = std::env::var("PTERA_MAX_MEMORY")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return v;
    }
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb.saturating_mul(1024))
}

/// Refuses, before anything is allocated, a method whose planned memory (arenas and
/// metadata) is more than [`memory_budget`], naming its largest arena.
pub fn check_memory(meta: &MethodMeta<'_>) -> Result<()> {
    let budget = memory_budget();
    let arenas = (0..meta.arena_count()).map(|k| meta.arena_size(k));
    let total = arenas
        .clone()
        .fold(meta.metadata_bytes() as u64, u64::saturating_add);
    if total > budget {
        let (k, size) = arenas.enumerate().max_by_key(|&(_, s)| s).unwrap_or((0, 0));
        bail!(
            "method `{}` needs {total} bytes of planned memory (largest: arena {} of {size} \
             bytes), more than the {budget} bytes this host can give (PTERA_MAX_MEMORY)",
            meta.name(),
            k + 1
        );
    }
    Ok(())
}

/// Checks inputs against the method's signature; one clear message on mismatch.
pub fn check_inputs(meta: &MethodMeta<'_>, inputs: &[HostTensor], names: &[String]) -> Result<()> {
    if inputs.len() != meta.num_inputs() {
        bail!(
            "method `{}` takes {} input(s), {} given",
            meta.name(),
            meta.num_inputs(),
            inputs.len()
        );
    }
    for (i, (t, name)) in inputs.iter().zip(names).enumerate() {
        let info = meta
            .input(i)
            .with_context(|| format!("input {i} is not a tensor input"))?;
        if info.dtype != t.dtype {
            bail!(
                "input {i} ({name}): expected dtype {}, got {}",
                info.dtype,
                t.dtype
            );
        }
        if info.shape.dims() != t.shape.as_slice() {
            bail!(
                "input {i} ({name}): expected shape {}, got {}",
                info.shape,
                t.shape()?
            );
        }
    }
    Ok(())
}

pub fn read_inputs(paths: &[PathBuf]) -> Result<(Vec<HostTensor>, Vec<String>)> {
    let tensors = paths
        .iter()
        .map(|p| HostTensor::read(p))
        .collect::<Result<Vec<_>>>()?;
    let names = paths.iter().map(|p| p.display().to_string()).collect();
    Ok((tensors, names))
}

/// Deterministic inputs for a method (int tensors = 1, float tensors = small ramps).
pub fn synth_inputs(meta: &MethodMeta<'_>) -> Result<Vec<HostTensor>> {
    (0..meta.num_inputs())
        .map(|i| {
            let info = meta
                .input(i)
                .with_context(|| format!("input {i} is not a tensor"))?;
            let n = info.shape.numel();
            let nbytes = n
                .checked_mul(info.dtype.size())
                .filter(|&b| b as u64 <= memory_budget())
                .with_context(|| {
                    format!(
                        "input {i}: {} {} is more bytes than this host can give",
                        info.dtype, info.shape
                    )
                })?;
            let mut bytes = vec![0u8; nbytes];
            for k in 0..n {
                if info.dtype.is_float() {
                    ptera::tensor::write_f64(
                        info.dtype,
                        &mut bytes,
                        k,
                        ((k % 17) as f64 - 8.0) / 8.0,
                    );
                } else {
                    ptera::tensor::write_i64(info.dtype, &mut bytes, k, 1);
                }
            }
            Ok(HostTensor {
                dtype: info.dtype,
                shape: info.shape.dims().to_vec(),
                bytes,
            })
        })
        .collect()
}

/// What the PteraBackend regions of `program` were packed for ("ISA, N-bit vectors") and the
/// widest packed tile this CPU has no kernel for; `None` without such regions.
fn packed_target(program: &ptera::Program<'_>) -> Option<(String, Option<usize>)> {
    let mut target = None;
    let mut missing: Option<usize> = None;
    for plan in program.methods() {
        for d in plan.delegates().unwrap_or_default().iter() {
            if d.id() != Some(ptera::delegate::ptera::ID) {
                continue;
            }
            let payload = d.processed().and_then(|r| program.delegate_data(r).ok())?;
            let (isa, bits, miss) = ptera::delegate::ptera::packed_for(payload)?;
            target.get_or_insert(if bits > 0 {
                format!("{isa}, {bits}-bit vectors")
            } else {
                isa.to_string()
            });
            missing = missing.max(miss);
        }
    }
    Some((target?, missing))
}

/// One line about a program lowered by `cargo xtask lower`: what it was packed for, and whether
/// this CPU reads its packed weights with kernels of their own width (`None` if the program has
/// no PteraBackend region).
pub fn lowered_note(program: &ptera::Program<'_>) -> Option<String> {
    let (what, missing) = packed_target(program)?;
    let kernel = ptera::linalg::gemm::micro_kernel().name();
    Some(match missing {
        None => format!("lowered for {what}: packed weights read in place by this CPU's kernels ({kernel})"),
        Some(nr) => format!(
            "note: lowered for {what}: this CPU's kernel ({kernel}) has no {nr}-wide tile, so those \
             products run panel by panel (slower, same results); lower for this CPU with --target native"
        ),
    })
}

/// "lowered for TARGET" for a program with PteraBackend regions (the board's CPU, not this
/// host, decides which kernels read the panels).
pub fn lowered_target(program: &ptera::Program<'_>) -> Option<String> {
    let (what, _) = packed_target(program)?;
    Some(format!(
        "lowered for {what}: a CPU without that tile width reads the panels panel by panel"
    ))
}

/// The inputs of a forward: read from `paths` and checked against the method's signature, or
/// synthesised deterministically when none are given.
pub fn forward_inputs(meta: &MethodMeta<'_>, paths: &[PathBuf]) -> Result<Vec<HostTensor>> {
    if paths.is_empty() {
        return synth_inputs(meta);
    }
    let (t, names) = read_inputs(paths)?;
    check_inputs(meta, &t, &names)?;
    Ok(t)
}

/// Instructions of every chain of a method.
pub fn instruction_count(plan: ptera::format::fb::ExecutionPlan<'_>) -> usize {
    plan.chains()
        .into_iter()
        .flatten()
        .map(|c| c.instructions().map_or(0, |i| i.len()))
        .sum()
}

/// Runs `f` with a pool of `threads` cores installed (`ptera::parallel`), created once for the
/// whole of `f`; one thread (or 0) runs `f` as it is.
pub fn with_threads<R>(threads: usize, f: impl FnOnce() -> R) -> R {
    if threads <= 1 {
        return f();
    }
    let team =
        ptera::parallel::threads::ThreadTeam::new(threads, ptera::linalg::gemm::GEMM_SCRATCH_F32);
    ptera::parallel::scoped(&team, f)
}
