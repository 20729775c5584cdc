//! `cargo xtask compare`: elementwise comparison of two `.npy` files.

use std::path::Path;

use anyhow::{bail, Result};

use crate::npy::HostTensor;

pub fn compare(got: &Path, want: &Path, atol: f64, rtol: f64) -> Result<()> {
    let (g, w) = (HostTensor::read(got)?, HostTensor::read(want)?);
    if g.dtype != w.dtype || g.shape != w.shape {
        bail!(
            "{} is {} {}, {} is {} {}",
            got.display(),
            g.dtype,
            g.shape()?,
            want.display(),
            w.dtype,
            w.shape()?
        );
    }
    let n: usize = g.shape.iter().product();
    let (mut worst, mut worst_i, mut bad) = (0f64, 0usize, 0usize);
    for i in 0..n {
        let (a, b) = (
            ptera::tensor::read_f64(g.dtype, &g.bytes, i),
            ptera::tensor::read_f64(w.dtype, &w.bytes, i),
        );
        if a.is_nan() && b.is_nan() {
            continue;
        }
        let d = (a - b).abs();
        if d.is_nan() || d > atol + rtol * b.abs() {
            bad += 1;
        }
        if d > worst || d.is_nan() {
            worst = d;
            worst_i = i;
        }
    }
    println!(
        "{} vs {}: {} {} elements, max |diff| {:.3e} at {}, {} outside atol {:e} + rtol {:e}",
        got.display(),
        want.display(),
        n,
        g.dtype,
        worst,
        worst_i,
        bad,
        atol,
        rtol
    );
    if bad > 0 {
        bail!("{bad} of {n} elements differ");
    }
    Ok(())
}
