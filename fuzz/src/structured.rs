//! Structure-aware program generation: valid-looking one-chain programs built from fuzzer
//! bytes through ptera's own test-program builder ([`OpTest`]), so that most inputs pass
//! loading and validation and reach `execute`, where the kernels' argument checks and
//! arithmetic are exercised with arbitrary operators, dtypes, shapes and scalars.

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use ptera::kernel_api::KernelDef;
use ptera::testing::{OpTest, Step};
use ptera::DType;

/// Element types, weighted towards those models use.
const DTYPES: &[DType] = &[
    DType::F32,
    DType::F32,
    DType::F32,
    DType::F32,
    DType::I64,
    DType::I64,
    DType::I32,
    DType::Bool,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::U16,
    DType::U32,
    DType::U64,
];

fn kernels() -> &'static [&'static KernelDef] {
    static ALL: OnceLock<Vec<&'static KernelDef>> = OnceLock::new();
    ALL.get_or_init(|| {
        ptera::kernels::KERNELS
            .iter()
            .flat_map(|t| t.iter())
            .collect()
    })
}

fn dtype(u: &mut Unstructured<'_>) -> Result<DType> {
    u.choose(DTYPES).copied()
}

/// Small shapes: rank 0 to 4, each dim 0 to 5 (mostly 1 to 3).
fn dims(u: &mut Unstructured<'_>) -> Result<Vec<usize>> {
    let rank = u.int_in_range(0..=4)?;
    (0..rank)
        .map(|_| {
            Ok(match u.int_in_range(0u8..=9)? {
                0 => 0,
                1 => 4,
                2 => 5,
                n => 1 + (n as usize % 3),
            })
        })
        .collect()
}

fn small_int(u: &mut Unstructured<'_>) -> Result<i64> {
    if u.ratio(1u8, 8)? {
        u.arbitrary()
    } else {
        u.int_in_range(-3..=8)
    }
}

fn double(u: &mut Unstructured<'_>) -> Result<f64> {
    if u.ratio(1u8, 8)? {
        u.arbitrary()
    } else {
        Ok(u.int_in_range(-16i32..=16)? as f64 / 4.0)
    }
}

fn bytes_of(u: &mut Unstructured<'_>, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let take = n.min(u.len());
    if let Ok(b) = u.bytes(take) {
        v[..take].copy_from_slice(b);
    }
    v
}

/// A program of one operator (or a few instructions) over arbitrary values.
pub fn program(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let all = kernels();
    let k = *u.choose(all)?;
    let mut t = OpTest::new(k.name);
    let mut tensors: Vec<i32> = Vec::new();
    let mut args: Vec<i32> = Vec::new();
    let n_args = u.int_in_range(1..=6)?;
    for _ in 0..n_args {
        let v = match u.int_in_range(0u8..=13)? {
            0..=4 => {
                let (dt, d) = (dtype(u)?, dims(u)?);
                let n = d.iter().product::<usize>() * dt.size();
                let v = t.input(dt, &d, &vec![0; n]);
                tensors.push(v);
                v
            }
            5 => {
                let (dt, d) = (dtype(u)?, dims(u)?);
                let n = d.iter().product::<usize>() * dt.size();
                let data = bytes_of(u, n);
                let v = t.constant(dt, &d, &data);
                tensors.push(v);
                v
            }
            6 | 7 => t.int(small_int(u)?),
            8 => t.double(double(u)?),
            9 => t.boolean(u.arbitrary()?),
            10 => {
                let n = u.int_in_range(0..=4)?;
                let items = (0..n).map(|_| small_int(u)).collect::<Result<Vec<_>>>()?;
                t.int_list(&items)
            }
            11 => t.none(),
            12 => {
                let n = u.int_in_range(0..=3)?;
                let mut items = Vec::new();
                for _ in 0..n {
                    if let Ok(&v) = u.choose(&tensors) {
                        items.push(v);
                    }
                }
                if u.arbitrary()? {
                    t.tensor_list(&items)
                } else {
                    let opt: Vec<Option<i32>> = items
                        .iter()
                        .map(|&v| u.arbitrary::<bool>().map(|s| s.then_some(v)))
                        .collect::<Result<_>>()?;
                    t.opt_tensor_list(&opt)
                }
            }
            _ => match u.int_in_range(0u8..=2)? {
                0 => {
                    let n = u.int_in_range(0..=4)?;
                    let items = (0..n).map(|_| double(u)).collect::<Result<Vec<_>>>()?;
                    t.double_list(&items)
                }
                1 => {
                    let n = u.int_in_range(0..=4)?;
                    let items = (0..n).map(|_| u.arbitrary()).collect::<Result<Vec<_>>>()?;
                    t.bool_list(&items)
                }
                _ => t.string(u.choose(&["mean", "none", "sum", "tanh", "", "reflect"])?),
            },
        };
        args.push(v);
    }
    let n_out = u.int_in_range(1..=2)?;
    for _ in 0..n_out {
        let (dt, d) = (dtype(u)?, dims(u)?);
        let v = match u.int_in_range(0u8..=7)? {
            0 => t.output_dynamic(dt, &d),
            1 => t.output_unplanned(dt, &d),
            _ => t.output(dt, &d),
        };
        tensors.push(v);
        args.push(v);
    }
    if u.ratio(1u8, 6)? {
        // A few instructions over any values: other operators, moves, jumps, frees.
        let n_values = args.iter().copied().max().unwrap_or(0) + 1;
        let any = |u: &mut Unstructured<'_>| u.int_in_range(-1..=n_values);
        let mut steps = vec![Step::Kernel(k.name.into(), args.clone())];
        for _ in 0..u.int_in_range(1..=3)? {
            steps.push(match u.int_in_range(0u8..=5)? {
                0 | 1 => {
                    let other = *u.choose(all)?;
                    let n = u.int_in_range(0..=5)?;
                    let a = (0..n).map(|_| any(u)).collect::<Result<Vec<_>>>()?;
                    Step::Kernel(other.name.into(), a)
                }
                2 => Step::Move(any(u)?, any(u)?),
                3 => Step::JumpFalse(any(u)?, u.int_in_range(-1..=4)?),
                4 => Step::Free(any(u)?),
                _ => Step::Kernel(k.name.into(), args.clone()),
            });
        }
        t.steps(&steps);
    } else {
        t.call(&args);
    }
    Ok(t.build())
}
