//! Reshapes planned as views at load: of region inputs and constants into intermediates
//! (other names of the same bytes), and of an intermediate into a region output (the
//! intermediate stored in the output, `fold::output_forwards`).

use super::*;

/// Reshapes of a region input and of a constant into intermediates are views of the same
/// bytes (no scratch, no copy); so is the reshape into the region's output (the multiply
/// writes the output, `reshapes_into_outputs_are_written_by_their_producer`).
#[test]
fn reshapes_of_inputs_and_constants_are_views() {
    let build = |through_reshapes: bool| {
        let mut g = Graph::default();
        let x = g.value(&[2, 6], Kind::Input);
        let cdata = ramp(12, 4);
        let (a, b) = if through_reshapes {
            let c = g.value(&[12], Kind::Constant(cdata));
            let r1 = g.value(&[3, 4], Kind::Internal);
            let r2 = g.value(&[3, 4], Kind::Internal);
            g.node(U::XNNStaticReshape, &[x, r1, 3, 4]);
            g.node(U::XNNStaticReshape, &[c, r2, 3, 4]);
            (r1, r2)
        } else {
            (x, g.value(&[2, 6], Kind::Constant(cdata)))
        };
        let s = g.value(
            if through_reshapes { &[3, 4] } else { &[2, 6] },
            Kind::Internal,
        );
        let o = g.value(&[12], Kind::Output);
        g.node(U::XNNMultiply, &[a, b, s, 0]);
        g.node(U::XNNStaticReshape, &[s, o, 12]);
        g
    };
    let xd = ramp(12, 3);
    let c = ramp(12, 4);
    let want: Vec<f32> = xd.iter().zip(&c).map(|(a, b)| a * b).collect();
    let scratch = |g: &Graph| {
        let mut t = OpTest::delegate("XnnpackBackend", g.payload());
        let xv = t.input_f32(&[2, 6], &xd);
        let ov = t.output(DType::F32, &[12]);
        t.call(&[xv, ov]);
        t.kernel_scratch_bytes().unwrap()
    };
    let (viewed, direct) = (build(true), build(false));
    close(
        &viewed.run(core::slice::from_ref(&xd)).unwrap()[0].f32(),
        &want,
    );
    close(
        &direct.run(core::slice::from_ref(&xd)).unwrap()[0].f32(),
        &want,
    );
    // Same scratch as the graph without the two reshapes: they planned nothing.
    assert_eq!(scratch(&viewed), scratch(&direct));
}

/// An intermediate that only a reshape into a region output reads is stored in that output:
/// its producer writes the output's bytes and the reshape copies nothing (no scratch for the
/// intermediate). Not when another node reads the intermediate or the output.
#[test]
fn reshapes_into_outputs_are_written_by_their_producer() {
    // `second`: 0 none, 1 a tanh of the intermediate, 2 a tanh of the output (a second output
    // either way).
    let build = |second: u8| {
        let mut g = Graph::default();
        let x = g.value(&[2, 6], Kind::Input);
        let c = g.value(&[2, 6], Kind::Constant(ramp(12, 4)));
        let s = g.value(&[2, 6], Kind::Internal);
        let o = g.value(&[12], Kind::Output);
        g.node(U::XNNMultiply, &[x, c, s, 0]);
        g.node(U::XNNStaticReshape, &[s, o, 12]);
        match second {
            1 => {
                let o2 = g.value(&[2, 6], Kind::Output);
                g.node(U::XNNTanh, &[s, o2]);
            }
            2 => {
                let o2 = g.value(&[12], Kind::Output);
                g.node(U::XNNTanh, &[o, o2]);
            }
            _ => {}
        }
        g
    };
    let xd = ramp(12, 3);
    let want: Vec<f32> = xd.iter().zip(&ramp(12, 4)).map(|(a, b)| a * b).collect();
    let tanh: Vec<f32> = want.iter().map(|v| v.tanh()).collect();
    let scratch = |g: &Graph, outputs: usize| {
        let mut t = OpTest::delegate("XnnpackBackend", g.payload());
        let mut vals = vec![t.input_f32(&[2, 6], &xd)];
        vals.extend((0..outputs).map(|_| t.output(DType::F32, &[12])));
        t.call(&vals);
        t.kernel_scratch_bytes().unwrap()
    };
    let alone = build(0);
    let out = alone.run(core::slice::from_ref(&xd)).unwrap();
    close(&out[0].f32(), &want);
    assert_eq!(scratch(&alone, 1), 0, "the intermediate took scratch");
    for second in [1, 2] {
        let g = build(second);
        let out = g.run(core::slice::from_ref(&xd)).unwrap();
        close(&out[0].f32(), &want);
        close(&out[1].f32(), &tanh);
        // The intermediate keeps its own 48 bytes when another node reads it or the output.
        assert!(scratch(&g, 2) >= 48, "second reader {second}");
    }
}
