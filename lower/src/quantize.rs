//! Weight quantization at lower time (`cargo xtask lower --quantize int8|int4:G`): the fp32
//! weight of a product becomes the rows, scales and column sums ptera's quantized `Linear`
//! reads (`schema/ptera.fbs`, `WeightLayout::Int8`/`Int4`); its input is quantized per row at
//! run time (dynamic int8 activations). No calibration data is needed.
//!
//! - `int8`: symmetric, per output channel: `s = max|w| / 127`, `q = round(w / s)` in
//!   `[-127, 127]`.
//! - `int4:G`: symmetric, per output channel and group of `G` inputs: `s = bf16(c · max|w| / 7)`
//!   (rounded to nearest even), `q = round(w / s)` in `[-8, 7]`, stored as `q + 8`, two per
//!   byte (the low nibble first). The clip `c` is the one of `CLIPS` with the smallest squared
//!   error over the group (clipping a few large weights buys a finer step for the rest).
//!
//! Rounding is to nearest, ties away from zero. A group or channel of zeros gets scale 0.

use ptera::linalg::quant::{column_sums, QWeights};

/// The quantization scheme of `--quantize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Int8,
    /// 4-bit with one bf16 scale per `group` inputs (an even number).
    Int4 {
        group: usize,
    },
}

impl Scheme {
    /// Parses `int8` or `int4:G` (G even, at least 2).
    pub fn parse(s: &str) -> Result<Scheme, String> {
        if s == "int8" {
            return Ok(Scheme::Int8);
        }
        if let Some(g) = s.strip_prefix("int4:") {
            let group: usize = g
                .parse()
                .map_err(|_| format!("--quantize {s}: group `{g}` is not a number"))?;
            if group < 2 || !group.is_multiple_of(2) {
                return Err(format!(
                    "--quantize {s}: the group must be even and at least 2"
                ));
            }
            return Ok(Scheme::Int4 { group });
        }
        Err(format!(
            "--quantize {s}: expected int8 or int4:G (for example int4:32)"
        ))
    }

    /// `int8` or `int4:G`.
    pub fn label(&self) -> String {
        match self {
            Scheme::Int8 => "int8".to_string(),
            Scheme::Int4 { group } => format!("int4:{group}"),
        }
    }

    /// Whether a `k`-deep weight can take this scheme (4-bit groups must divide the depth).
    pub fn fits(&self, k: usize) -> bool {
        match *self {
            Scheme::Int8 => true,
            Scheme::Int4 { group } => k.is_multiple_of(group),
        }
    }
}

/// A quantized weight: its rows, scales (fp32 `[N]` or bf16 `[N, K / G]`, little endian),
/// column sums, and the largest error `max |w - ŵ|` relative to `max |w|` over the weight.
pub struct Quantized {
    pub rows: Vec<u8>,
    pub scales: Vec<u8>,
    pub sums: Vec<f32>,
    pub max_rel_err: f32,
}

/// Candidate clips of the 4-bit range (fractions of `max |w|` mapped to ±7).
const CLIPS: [f32; 6] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75];

/// f32 → bf16, round to nearest even (finite inputs).
fn bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// Quantizes the `n × k` weight `w(j, t)` (output channel `j`, input `t`) with `scheme`
/// (which must [`Scheme::fits`] `k`).
pub fn quantize(
    w: &dyn Fn(usize, usize) -> f32,
    n: usize,
    k: usize,
    scheme: Scheme,
) -> Result<Quantized, String> {
    let (mut err, mut amax_all) = (0f32, 0f32);
    let (rows, scales) = match scheme {
        Scheme::Int8 => {
            let mut rows = vec![0u8; n * k];
            let mut scales = Vec::with_capacity(n * 4);
            for j in 0..n {
                let amax = (0..k).fold(0f32, |m, t| m.max(w(j, t).abs()));
                amax_all = amax_all.max(amax);
                let s = amax / 127.0;
                for t in 0..k {
                    let v = w(j, t);
                    let q = if s > 0.0 {
                        (v / s).round().clamp(-127.0, 127.0)
                    } else {
                        0.0
                    };
                    rows[j * k + t] = q as i8 as u8;
                    err = err.max((v - q * s).abs());
                }
                scales.extend_from_slice(&s.to_le_bytes());
            }
            (rows, scales)
        }
        Scheme::Int4 { group } => {
            let rb = k.div_ceil(2);
            let mut rows = vec![0u8; n * rb];
            let mut scales = Vec::with_capacity(n * (k / group) * 2);
            for j in 0..n {
                for g in 0..k / group {
                    let span = g * group..(g + 1) * group;
                    let amax = span.clone().fold(0f32, |m, t| m.max(w(j, t).abs()));
                    amax_all = amax_all.max(amax);
                    let sq_err = |s: f32| -> f32 {
                        span.clone()
                            .map(|t| {
                                let v = w(j, t);
                                let q = if s > 0.0 {
                                    (v / s).round().clamp(-8.0, 7.0)
                                } else {
                                    0.0
                                };
                                (v - q * s) * (v - q * s)
                            })
                            .sum()
                    };
                    let mut sb = bf16(amax / 7.0);
                    let mut best = f32::INFINITY;
                    for c in CLIPS {
                        let cand = bf16(c * amax / 7.0);
                        let e = sq_err(f32::from_bits((cand as u32) << 16));
                        if e < best {
                            (best, sb) = (e, cand);
                        }
                    }
                    let s = f32::from_bits((sb as u32) << 16);
                    for t in span {
                        let v = w(j, t);
                        let q = if s > 0.0 {
                            (v / s).round().clamp(-8.0, 7.0)
                        } else {
                            0.0
                        };
                        let nib = (q as i32 + 8) as u8;
                        rows[j * rb + t / 2] |= if t % 2 == 0 { nib } else { nib << 4 };
                        err = err.max((v - q * s).abs());
                    }
                    scales.extend_from_slice(&sb.to_le_bytes());
                }
            }
            (rows, scales)
        }
    };
    let mut sums = vec![0f32; n];
    let qw = match scheme {
        Scheme::Int8 => QWeights::Qc8w {
            data: &rows,
            scales: &scales,
        },
        Scheme::Int4 { group } => QWeights::Qb4w {
            data: &rows,
            scales: &scales,
            group,
        },
    };
    column_sums(&qw, n, k, &mut sums).map_err(|e| format!("quantized weight: {e}"))?;
    Ok(Quantized {
        rows,
        scales,
        sums,
        max_rel_err: if amax_all > 0.0 { err / amax_all } else { 0.0 },
    })
}
