//! Hostile and wrong inputs give specific typed errors, never panics or out-of-bounds reads.

mod common;

use common::*;
use ptera::host::AlignedBuf;
use ptera::testing::OpTest;
use ptera::Registry;
use ptera::{DType, Error, Method, MethodMeta, OwnedArenas, Program, Shape};

/// Loads, validates, loads the method and runs it with the fixture inputs; any error is fine,
/// a panic is not. Returns the error if there was one.
fn try_everything(bytes: &[u8], case: &str) -> Option<Error> {
    let buf = AlignedBuf::from_bytes(bytes);
    let reg = Registry::standard();
    let program = match Program::load(buf.as_slice()) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let meta = match MethodMeta::new(&program, "forward", &reg) {
        Ok(m) => m,
        Err(e) => return Some(e),
    };
    // Refuse absurd plans like a careful host would (a corrupted size can ask for terabytes).
    let total: u64 = (0..meta.arena_count()).map(|k| meta.arena_size(k)).sum();
    if total > 1 << 30 {
        return Some(Error::HostAllocation { bytes: total });
    }
    let mut bufs = match OwnedArenas::for_meta(&meta) {
        Ok(b) => b,
        Err(e) => return Some(e),
    };
    let mut method = match bufs.load(meta, &reg) {
        Ok(m) => m,
        Err(e) => return Some(e),
    };
    for (i, inp) in inputs(case).iter().enumerate() {
        if let Err(e) = method.set_input(i, inp.dtype, &Shape::new(&inp.shape).unwrap(), &inp.bytes)
        {
            return Some(e);
        }
    }
    method.execute().err()
}

#[test]
fn truncated_files_are_rejected() {
    let file = pte("mlp_portable");
    let bytes = file.as_slice();
    for len in [
        0,
        3,
        7,
        8,
        11,
        20,
        39,
        64,
        200,
        bytes.len() / 2,
        bytes.len() - 1,
    ] {
        let e = try_everything(&bytes[..len], "mlp_portable").expect("truncated file must fail");
        assert!(
            matches!(
                e,
                Error::Truncated { .. }
                    | Error::BadHeader { .. }
                    | Error::InvalidFlatbuffer { .. }
                    | Error::OutOfBounds { .. }
            ),
            "len {len}: {e}"
        );
    }
    // Cutting inside the segment data is reported as truncated segment data.
    match Program::load(AlignedBuf::from_bytes(&bytes[..bytes.len() - 1]).as_slice()) {
        Err(Error::Truncated { what, .. }) => assert_eq!(what, "segment data"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn wrong_identifier_is_rejected() {
    let file = pte("mlp_portable");
    let mut bytes = file.as_slice().to_vec();
    bytes[4..8].copy_from_slice(b"ET11");
    match Program::load(AlignedBuf::from_bytes(&bytes).as_slice()) {
        Err(Error::BadIdentifier { found }) => assert_eq!(&found, b"ET11"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn misaligned_buffer_is_rejected() {
    let file = pte("mlp_portable");
    let mut v = vec![0u8; file.len() + 32];
    let start = 16 - (v.as_ptr() as usize % 16) + 1; // deliberately 1 byte off 16-alignment
    v[start..start + file.len()].copy_from_slice(file.as_slice());
    assert!(matches!(
        Program::load(&v[start..start + file.len()]),
        Err(Error::MisalignedBuffer { .. })
    ));
}

#[test]
fn header_offsets_are_checked() {
    let file = pte("mlp_portable");
    let base = file.as_slice().to_vec();
    // segment_base_offset (bytes 24..32) pointing past the end.
    let mut b = base.clone();
    b[24..32].copy_from_slice(&(base.len() as u64 * 4).to_le_bytes());
    assert!(matches!(
        Program::load(AlignedBuf::from_bytes(&b).as_slice()),
        Err(Error::Truncated { .. })
    ));
    // program_size (16..24) larger than the file.
    let mut b = base.clone();
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        Program::load(AlignedBuf::from_bytes(&b).as_slice()),
        Err(Error::Truncated { .. })
    ));
    // header length below 24.
    let mut b = base.clone();
    b[12..16].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(
        Program::load(AlignedBuf::from_bytes(&b).as_slice()),
        Err(Error::BadHeader { .. })
    ));
    // root offset outside the flatbuffer.
    let mut b = base.clone();
    b[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Program::load(AlignedBuf::from_bytes(&b).as_slice()),
        Err(Error::BadHeader { .. })
    ));
}

/// Flip every byte of the flatbuffer region of a real program, one at a time: every variant
/// either runs or fails with an error; none panics. Counts how many were rejected.
#[test]
fn every_single_byte_corruption_is_handled() {
    for case in ["mlp_portable", "cnn_portable"] {
        let file = pte(case);
        let bytes = file.as_slice();
        let program_size = Program::load(bytes).unwrap().header().unwrap().program_size as usize;
        let mut rejected = 0;
        for i in 0..program_size {
            let mut b = bytes.to_vec();
            b[i] ^= 0xa5;
            if try_everything(&b, case).is_some() {
                rejected += 1;
            }
        }
        assert!(
            rejected > program_size / 10,
            "{case}: only {rejected} of {program_size} corruptions detected"
        );
    }
}

/// Flip every byte of the XNNPACK payload segments of a real lowered program (header,
/// graph flatbuffer): each variant runs or fails with an error, never panics.
#[test]
fn every_single_byte_corruption_of_delegate_payloads_is_handled() {
    for case in ["mlp_xnnpack", "cnn_xnnpack"] {
        let file = pte(case);
        let bytes = file.as_slice();
        let program = Program::load(bytes).unwrap();
        let base = bytes.as_ptr() as usize;
        let mut ranges = Vec::new();
        for plan in program.methods() {
            for del in plan.delegates().into_iter().flatten() {
                let payload = program.delegate_data(del.processed().unwrap()).unwrap();
                ranges.push((payload.as_ptr() as usize - base, payload.len()));
            }
        }
        assert!(!ranges.is_empty());
        let (mut rejected, mut total) = (0, 0);
        for (start, len) in ranges {
            for i in start..start + len {
                let mut b = bytes.to_vec();
                b[i] ^= 0x5a;
                total += 1;
                if try_everything(&b, case).is_some() {
                    rejected += 1;
                }
            }
        }
        assert!(
            rejected > total / 10,
            "{case}: only {rejected} of {total} payload corruptions detected"
        );
    }
}

/// Corrupt the u32 offsets inside tables (the most dangerous fields) with large values.
#[test]
fn large_offsets_are_handled() {
    let file = pte("mlp_portable");
    let bytes = file.as_slice();
    let program_size = Program::load(bytes).unwrap().header().unwrap().program_size as usize;
    for i in (40..program_size - 4).step_by(4) {
        for v in [0x7fff_fff0u32, 0xffff_fffc, 0x10] {
            let mut b = bytes.to_vec();
            b[i..i + 4].copy_from_slice(&v.to_le_bytes());
            let _ = try_everything(&b, "mlp_portable");
        }
    }
}

fn load_mlp<'a>(file: &'a AlignedBuf, reg: &'a Registry<'static>) -> MethodMeta<'a> {
    let program = Program::load(file.as_slice()).unwrap();
    MethodMeta::new(&program, "forward", reg).unwrap()
}

#[test]
fn input_of_wrong_shape_or_dtype_is_rejected() {
    let file = pte("mlp_portable");
    let reg = Registry::portable();
    let meta = load_mlp(&file, &reg);
    let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
    let mut method = bufs.load(meta, &reg).unwrap();
    let x = vec![0f32; 4 * 32];
    match method.set_input_f32(0, &Shape::new(&[4, 31]).unwrap(), &x[..4 * 31]) {
        Err(Error::InputShape {
            index: 0,
            expected,
            got,
        }) => {
            assert_eq!(expected.dims(), &[4, 32]);
            assert_eq!(got.dims(), &[4, 31]);
        }
        other => panic!("{other:?}"),
    }
    let xi = vec![0i64; 4 * 32];
    match method.set_input_i64(0, &Shape::new(&[4, 32]).unwrap(), &xi) {
        Err(Error::InputDType {
            index: 0,
            expected: DType::F32,
            got: DType::I64,
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        method.set_input_f32(1, &Shape::new(&[4, 32]).unwrap(), &x),
        Err(Error::InputIndex { index: 1, count: 1 })
    ));
    assert!(matches!(
        method.execute(),
        Err(Error::InputNotSet { index: 0 })
    ));
    // After a run, inputs must be set again (the plan may reuse their storage).
    method
        .set_input_f32(0, &Shape::new(&[4, 32]).unwrap(), &x)
        .unwrap();
    method.execute().unwrap();
    assert!(matches!(
        method.execute(),
        Err(Error::InputNotSet { index: 0 })
    ));
}

#[test]
fn arena_too_small_names_the_arena() {
    let file = pte("mlp_portable");
    let reg = Registry::portable();
    let meta = load_mlp(&file, &reg);
    let need = meta.arena_size(0) as usize;
    let mut arena = AlignedBuf::zeroed(need - 16);
    let mut md = AlignedBuf::zeroed(meta.metadata_bytes());
    match Method::load(meta, &reg, [arena.as_mut_slice()], md.as_mut_slice()) {
        Err(Error::ArenaTooSmall {
            memory_id: 1,
            needed,
            got,
        }) => {
            assert_eq!(needed as usize, need);
            assert_eq!(got, need - 16);
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    let meta = load_mlp(&file, &reg);
    let mut arena = AlignedBuf::zeroed(need);
    let mut md = AlignedBuf::zeroed(meta.metadata_bytes() - 1);
    let needed = meta.metadata_bytes();
    match Method::load(meta, &reg, [arena.as_mut_slice()], md.as_mut_slice()) {
        Err(Error::MetadataTooSmall { needed: n, .. }) => assert_eq!(n, needed),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let meta = load_mlp(&file, &reg);
    let mut md = AlignedBuf::zeroed(meta.metadata_bytes());
    match Method::load(meta, &reg, std::iter::empty(), md.as_mut_slice()) {
        Err(Error::ArenaCount {
            expected: 1,
            got: 0,
        }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn exact_sizes_from_method_meta_are_enough() {
    let file = pte("gpt2_portable");
    let reg = Registry::portable();
    let program = Program::load(file.as_slice()).unwrap();
    let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
    let mut arena = AlignedBuf::zeroed(meta.arena_size(0) as usize);
    let mut md = AlignedBuf::zeroed(meta.metadata_bytes());
    assert!(Method::load(meta, &reg, [arena.as_mut_slice()], md.as_mut_slice()).is_ok());
}

#[test]
fn unknown_operator_is_named_at_load() {
    let mut t = OpTest::new("custom::frobnicate.out");
    let a = t.input_f32(&[2], &[1.0, 2.0]);
    let o = t.output(DType::F32, &[2]);
    t.call(&[a, o, o]);
    match t.run() {
        Err(Error::MissingOperators { count: 1, names }) => {
            assert_eq!(names.as_str(), "custom::frobnicate.out")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_backend_is_named_at_load() {
    let file = pte("mlp_xnnpack");
    let program = Program::load(file.as_slice()).unwrap();
    let reg = Registry {
        kernels: ptera::kernels::portable::KERNELS,
        backends: &[],
    };
    match MethodMeta::new(&program, "forward", &reg) {
        Err(Error::UnknownBackend {
            delegate: 0,
            backend,
        }) => assert_eq!(backend.as_str(), "XnnpackBackend"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn unknown_method_is_named() {
    let file = pte("mlp_portable");
    let program = Program::load(file.as_slice()).unwrap();
    match MethodMeta::new(&program, "backward", &Registry::portable()) {
        Err(Error::MethodNotFound { name }) => assert_eq!(name.as_str(), "backward"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// An output that no instruction leaves storage for (declared with no memory plan and never
/// bound, or freed by a `FreeCall`) is a typed error from `execute` and `Method::output`; a
/// view over a null pointer would be undefined behaviour when its bytes are read.
#[test]
fn output_without_storage_is_an_error_not_a_null_view() {
    use ptera::testing::Step;
    // Freed before the end.
    let mut t = OpTest::new("aten::abs.out");
    let x = t.input_f32(&[4], &[1.0, -2.0, 3.0, -4.0]);
    let y = t.output(DType::F32, &[4]);
    t.steps(&[
        Step::Kernel("aten::abs.out".into(), vec![x, y, y]),
        Step::Free(y),
    ]);
    match t.run() {
        Err(Error::OutputNoData { index: 0, value }) => assert_eq!(value, y as usize),
        other => panic!("freed output: expected OutputNoData, got {other:?}"),
    }
    // Declared unplanned and never bound by any kernel.
    let mut t = OpTest::new("aten::abs.out");
    let x = t.input_f32(&[4], &[1.0, -2.0, 3.0, -4.0]);
    let y = t.output(DType::F32, &[4]);
    let z = t.output_unplanned(DType::F32, &[4]);
    t.call(&[x, y, y]);
    match t.run() {
        Err(Error::OutputNoData { index: 1, value }) => assert_eq!(value, z as usize),
        other => panic!("unplanned output: expected OutputNoData, got {other:?}"),
    }
}

/// `segment_base_offset = 0` with a non-zero `segment_data_size` is refused at load; before,
/// `Program::segment` sliced past the end of the file.
#[test]
fn segment_data_without_base_offset_is_refused() {
    let file = pte("mlp_portable");
    let mut b = file.as_slice().to_vec();
    b[24..32].copy_from_slice(&0u64.to_le_bytes());
    assert!(matches!(
        Program::load(AlignedBuf::from_bytes(&b).as_slice()),
        Err(Error::BadHeader { .. })
    ));
    // Every variant of the base offset either loads with in-bounds segments or is refused.
    for base in [1u64, 8, 64, 128, b.len() as u64 - 1, b.len() as u64] {
        let mut c = file.as_slice().to_vec();
        c[24..32].copy_from_slice(&base.to_le_bytes());
        let _ = try_everything(&c, "mlp_portable");
    }
}

/// XNNPACK payloads shorter than a flatbuffer's root offset and identifier (8 bytes) are a
/// typed error at `MethodMeta::new`, not the flatbuffers crate's assertion.
#[test]
fn tiny_xnnpack_payloads_are_refused() {
    for len in 0..8 {
        let mut t = OpTest::delegate("XnnpackBackend", vec![0x5a; len]);
        let x = t.input_f32(&[2], &[1.0, 2.0]);
        let y = t.output(DType::F32, &[2]);
        t.call(&[x, y]);
        let bytes = t.build();
        let buf = AlignedBuf::from_bytes(&bytes);
        let program = Program::load(buf.as_slice()).unwrap();
        let reg = Registry::standard();
        match MethodMeta::new(&program, "forward", &reg) {
            Err(Error::DelegateInit { .. }) => {}
            other => panic!(
                "{len}-byte payload: expected DelegateInit error, got {:?}",
                other.err()
            ),
        }
    }
}

#[test]
fn an_arena_beyond_the_address_space_is_refused_at_method_meta() {
    // 5 GiB of arena: a 64-bit target plans it (and a host refuses to allocate it); a 32-bit
    // target cannot address it and MethodMeta says so instead of truncating the size.
    let mut t = OpTest::new("aten::abs.out");
    let x = t.input_f32(&[4], &[1.0, -2.0, 3.0, -4.0]);
    let y = t.output(DType::F32, &[4]);
    t.call(&[x, y, y]);
    t.grow_arena(5 << 30);
    let bytes = t.build();
    let buf = AlignedBuf::from_bytes(&bytes);
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = Registry::standard();
    match MethodMeta::new(&program, "forward", &reg) {
        Ok(meta) if usize::BITS > 32 => assert!(meta.arena_size(0) > 5 << 30),
        Ok(_) => panic!("a 5 GiB arena accepted on a 32-bit target"),
        Err(Error::Invalid { what, detail, .. }) if usize::BITS == 32 => {
            assert_eq!(what, "non_const_buffer_sizes");
            assert_eq!(detail, "arena larger than this target's address space");
        }
        Err(e) => panic!("{e}"),
    }
}
