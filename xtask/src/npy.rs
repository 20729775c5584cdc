//! `.npy` input and output through the npyz crate: raw little-endian C-order tensors.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use ptera::{DType, Shape};

/// A host tensor read from or written to `.npy`.
pub struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Little-endian element bytes, C order.
    pub bytes: Vec<u8>,
}

fn dtype_of(descr: &str) -> Option<DType> {
    Some(match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "<i2" => DType::I16,
        "|i1" => DType::I8,
        "|u1" => DType::U8,
        "<u2" => DType::U16,
        "<u4" => DType::U32,
        "<u8" => DType::U64,
        "|b1" => DType::Bool,
        _ => return None,
    })
}

fn descr_of(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I16 => "<i2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::BF16 => "<V2",
    }
}

impl HostTensor {
    /// Reads a `.npy` file (`ptera::host::npy`: sizes checked against the file before
    /// anything is allocated).
    pub fn read(path: &Path) -> Result<HostTensor> {
        let file =
            std::fs::read(path).with_context(|| format!("cannot open {}", path.display()))?;
        let npy = ptera::host::npy::parse(&file).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let descr = npy.descr();
        let dtype = dtype_of(&descr)
            .with_context(|| format!("{}: unsupported .npy dtype {descr}", path.display()))?;
        Ok(HostTensor {
            dtype,
            shape: npy.shape,
            bytes: npy.data.to_vec(),
        })
    }

    pub fn shape(&self) -> Result<Shape> {
        Shape::new(&self.shape).context("rank above 16")
    }

    /// Writes with npyz, in the tensor's own dtype.
    pub fn write(&self, path: &Path) -> Result<()> {
        let file = BufWriter::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        );
        let descr = descr_of(self.dtype);
        let b = &self.bytes;
        match self.dtype {
            DType::F32 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::F64 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::I64 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::I32 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::I16 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(2)
                    .map(|c| i16::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::I8 => write_rows(file, &self.shape, descr, b.iter().map(|&c| c as i8)),
            DType::U8 => write_rows(file, &self.shape, descr, b.iter().copied()),
            DType::U16 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(2)
                    .map(|c| u16::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::U32 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::U64 => write_rows(
                file,
                &self.shape,
                descr,
                b.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap())),
            ),
            DType::Bool => write_rows(file, &self.shape, descr, b.iter().map(|&c| c != 0)),
            DType::F16 | DType::BF16 => {
                bail!("{} outputs cannot be written as .npy yet", self.dtype)
            }
        }
    }
}

fn write_rows<T: npyz::Serialize>(
    file: BufWriter<File>,
    shape: &[usize],
    descr: &str,
    rows: impl Iterator<Item = T>,
) -> Result<()> {
    use npyz::WriterBuilder;
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let dtype = npyz::DType::Plain(descr.parse::<npyz::TypeStr>().context("type string")?);
    let mut w = npyz::WriteOptions::new()
        .dtype(dtype)
        .shape(&shape)
        .writer(file)
        .begin_nd()?;
    w.extend(rows)?;
    w.finish()?;
    Ok(())
}
