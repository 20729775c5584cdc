//! XNNPACK node semantics against reference code, and corrupted payloads.
//!
//! Payloads are built with the generated flatbuffer builders (XH00 header, XNNGraph,
//! constant region) and run through a real program with one DelegateCall.

use std::string::String;
use std::vec::Vec;

use flatbuffers::FlatBufferBuilder;

use super::graph::INVALID_ID;
use crate::dtype::DType;
use crate::error::Error;
use crate::exec::Registry;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::testing::{OpTest, Step, TestTensor};

enum Kind {
    Input,
    Output,
    Internal,
    Constant(Vec<f32>),
}

struct Val {
    dims: Vec<u32>,
    kind: Kind,
    ext: u32,
}

/// Builds XNNPACK payloads node by node.
#[derive(Default)]
struct Graph {
    vals: Vec<Val>,
    nodes: Vec<(xf::XNodeUnion, Vec<u32>, Option<(f32, f32)>)>,
    externs: u32,
    /// Corruption knobs.
    bad_magic: bool,
    constant_offset_bias: u64,
}

impl Graph {
    fn value(&mut self, dims: &[u32], kind: Kind) -> u32 {
        let ext = match kind {
            Kind::Input | Kind::Output => {
                self.externs += 1;
                self.externs - 1
            }
            _ => u32::MAX,
        };
        self.vals.push(Val {
            dims: dims.to_vec(),
            kind,
            ext,
        });
        (self.vals.len() - 1) as u32
    }

    fn node(&mut self, t: xf::XNodeUnion, fields: &[u32]) {
        self.nodes.push((t, fields.to_vec(), None));
    }

    fn clamp(&mut self, lo: f32, hi: f32) {
        self.nodes.last_mut().unwrap().2 = Some((lo, hi));
    }

    fn payload(&self) -> Vec<u8> {
        let mut b = FlatBufferBuilder::new();
        let mut consts: Vec<u8> = Vec::new();
        let mut cdata = vec![xf::ConstantDataOffset::create(
            &mut b,
            &xf::ConstantDataOffsetArgs::default(),
        )];
        let mut xvalues = Vec::new();
        for (i, v) in self.vals.iter().enumerate() {
            let dims = b.create_vector(&v.dims);
            let mut cidx = 0;
            if let Kind::Constant(data) = &v.kind {
                while !consts.len().is_multiple_of(16) {
                    consts.push(0);
                }
                let off = consts.len() as u64 + self.constant_offset_bias;
                for x in data {
                    consts.extend_from_slice(&x.to_le_bytes());
                }
                cdata.push(xf::ConstantDataOffset::create(
                    &mut b,
                    &xf::ConstantDataOffsetArgs {
                        offset: off,
                        size: data.len() as u64 * 4,
                        named_key: None,
                    },
                ));
                cidx = cdata.len() as u32 - 1;
            }
            let flags = match v.kind {
                Kind::Input => 1,
                Kind::Output => 2,
                _ => 0,
            };
            let t = xf::XNNTensorValue::create(
                &mut b,
                &xf::XNNTensorValueArgs {
                    datatype: xf::XNNDatatype::xnn_datatype_fp32,
                    num_dims: v.dims.len() as u32,
                    dims: Some(dims),
                    constant_buffer_idx: cidx,
                    external_id: v.ext,
                    flags,
                    id_out: i as u32,
                    ..Default::default()
                },
            );
            xvalues.push(xf::XValue::create(
                &mut b,
                &xf::XValueArgs {
                    xvalue_union_type: xf::XValueUnion::XNNTensorValue,
                    xvalue_union: Some(t.as_union_value()),
                },
            ));
        }
        let mut xnodes = Vec::new();
        for (t, f, clamp) in &self.nodes {
            let body = match *t {
                xf::XNodeUnion::XNNFullyConnected => xf::XNNFullyConnected::create(
                    &mut b,
                    &xf::XNNFullyConnectedArgs {
                        input1_id: f[0],
                        filter_id: f[1],
                        bias_id: f[2],
                        output_id: f[3],
                        flags: f[4],
                    },
                )
                .as_union_value(),
                xf::XNodeUnion::XNNStaticTranspose => {
                    let perm = b.create_vector(&f[2..]);
                    xf::XNNStaticTranspose::create(
                        &mut b,
                        &xf::XNNStaticTransposeArgs {
                            num_dims: (f.len() - 2) as u32,
                            perm: Some(perm),
                            input_id: f[0],
                            output_id: f[1],
                            flags: 0,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNStaticReshape => {
                    let shape = b.create_vector(&f[2..]);
                    xf::XNNStaticReshape::create(
                        &mut b,
                        &xf::XNNStaticReshapeArgs {
                            num_dims: (f.len() - 2) as u32,
                            new_shape: Some(shape),
                            input_id: f[0],
                            output_id: f[1],
                            flags: 0,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNStaticSlice => {
                    let r = (f.len() - 2) / 2;
                    let offsets = b.create_vector(&f[2..2 + r]);
                    let sizes = b.create_vector(&f[2 + r..]);
                    xf::XNNStaticSlice::create(
                        &mut b,
                        &xf::XNNStaticSliceArgs {
                            num_dims: r as u32,
                            offsets: Some(offsets),
                            sizes: Some(sizes),
                            input_id: f[0],
                            output_id: f[1],
                            flags: 0,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNStaticConstantPad => {
                    // fields: input, output, value bits, pre..., post...
                    let r = (f.len() - 3) / 2;
                    let pre = b.create_vector(&f[3..3 + r]);
                    let post = b.create_vector(&f[3 + r..]);
                    xf::XNNStaticConstantPad::create(
                        &mut b,
                        &xf::XNNStaticConstantPadArgs {
                            pre_paddings: Some(pre),
                            post_paddings: Some(post),
                            padding_value: f32::from_bits(f[2]),
                            input_id: f[0],
                            output_id: f[1],
                            flags: 0,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNConcatenate2 | xf::XNodeUnion::XNNConcatenate3 => {
                    xf::_XNNCat::create(
                        &mut b,
                        &xf::_XNNCatArgs {
                            axis: f[0],
                            input1_id: f[1],
                            input2_id: f[2],
                            input3_id: f[3],
                            input4_id: INVALID_ID,
                            output_id: f[4],
                            flags: 0,
                            input5_id: INVALID_ID,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNConv2d
                | xf::XNodeUnion::XNNDepthwiseConv2d
                | xf::XNodeUnion::XNNConvTranspose2d => {
                    // Transposed: two more fields before the ids, the adjustments.
                    let (p, adj, ids) = if *t == xf::XNodeUnion::XNNConvTranspose2d {
                        (&f[..13], [f[13], f[14]], &f[15..])
                    } else {
                        (&f[..13], [0, 0], &f[13..])
                    };
                    xf::_XNNNodeConv::create(
                        &mut b,
                        &xf::_XNNNodeConvArgs {
                            padding_top: p[0],
                            padding_right: p[1],
                            padding_bottom: p[2],
                            padding_left: p[3],
                            kernel_height: p[4],
                            kernel_width: p[5],
                            subsampling_height: p[6],
                            subsampling_width: p[7],
                            dilation_height: p[8],
                            dilation_width: p[9],
                            group_input_channels: p[10],
                            group_output_channels: p[11],
                            groups: p[12],
                            adjustment_height: adj[0],
                            adjustment_width: adj[1],
                            input1_id: ids[0],
                            filter_id: ids[1],
                            bias_id: ids[2],
                            output_id: ids[3],
                            flags: 0,
                        },
                    )
                    .as_union_value()
                }
                xf::XNodeUnion::XNNMaxPooling2d | xf::XNodeUnion::XNNAvgPooling2d => {
                    xf::_XNNPooling2D::create(
                        &mut b,
                        &xf::_XNNPooling2DArgs {
                            padding_top: f[0],
                            padding_right: f[1],
                            padding_bottom: f[2],
                            padding_left: f[3],
                            pooling_height: f[4],
                            pooling_width: f[5],
                            stride_height: f[6],
                            stride_width: f[7],
                            dilation_height: f[8],
                            dilation_width: f[9],
                            input_id: f[10],
                            output_id: f[11],
                            flags: 0x40,
                        },
                    )
                    .as_union_value()
                }
                _ if f.len() == 2 => xf::_XNNNode1x1::create(
                    &mut b,
                    &xf::_XNNNode1x1Args {
                        input_id: f[0],
                        output_id: f[1],
                        flags: 0,
                    },
                )
                .as_union_value(),
                _ => xf::_XNNNode2x1::create(
                    &mut b,
                    &xf::_XNNNode2x1Args {
                        input1_id: f[0],
                        input2_id: f[1],
                        output_id: f[2],
                        flags: f[3],
                    },
                )
                .as_union_value(),
            };
            let mm = clamp.map(|(lo, hi)| {
                xf::OutputMinMax::create(
                    &mut b,
                    &xf::OutputMinMaxArgs {
                        output_min: lo,
                        output_max: hi,
                    },
                )
            });
            xnodes.push(xf::XNode::create(
                &mut b,
                &xf::XNodeArgs {
                    xnode_union_type: *t,
                    xnode_union: Some(body),
                    debug_handle: 0,
                    output_min_max: mm,
                },
            ));
        }
        let xvalues = b.create_vector(&xvalues);
        let xnodes = b.create_vector(&xnodes);
        let cdata = b.create_vector(&cdata);
        let version = b.create_string("0");
        let root = xf::XNNGraph::create(
            &mut b,
            &xf::XNNGraphArgs {
                version: Some(version),
                xnodes: Some(xnodes),
                xvalues: Some(xvalues),
                num_externs: self.externs,
                constant_data: Some(cdata),
                ..Default::default()
            },
        );
        xf::finish_xnngraph_buffer(&mut b, root);
        let fbb = b.finished_data();
        let c_off = (32 + fbb.len()).div_ceil(16) * 16;
        let mut out = vec![0u8; c_off];
        out[4..8].copy_from_slice(if self.bad_magic { b"XH01" } else { b"XH00" });
        out[8..10].copy_from_slice(&30u16.to_le_bytes());
        out[10..14].copy_from_slice(&32u32.to_le_bytes());
        out[14..18].copy_from_slice(&(fbb.len() as u32).to_le_bytes());
        out[18..22].copy_from_slice(&(c_off as u32).to_le_bytes());
        out[22..30].copy_from_slice(&(consts.len() as u64).to_le_bytes());
        out[32..32 + fbb.len()].copy_from_slice(fbb);
        out.extend_from_slice(&consts);
        out
    }

    /// Runs with the given input data (one per Input value, in order); returns outputs.
    fn run(&self, inputs: &[Vec<f32>]) -> Result<Vec<TestTensor>, Error> {
        self.run_in(inputs, Registry::standard())
    }

    /// [`run`](Self::run) with fp32 filters packed at load.
    fn run_packing(&self, inputs: &[Vec<f32>]) -> Result<Vec<TestTensor>, Error> {
        self.run_in(inputs, Registry::packing())
    }

    fn run_in(&self, inputs: &[Vec<f32>], r: Registry<'static>) -> Result<Vec<TestTensor>, Error> {
        let mut t = OpTest::delegate("XnnpackBackend", self.payload()).with_registry(r);
        let mut args = vec![0i32; self.externs as usize];
        let mut k = 0;
        for v in &self.vals {
            let dims: Vec<usize> = v.dims.iter().map(|&d| d as usize).collect();
            match v.kind {
                Kind::Input => {
                    args[v.ext as usize] = t.input_f32(&dims, &inputs[k]);
                    k += 1;
                }
                Kind::Output => args[v.ext as usize] = t.output(DType::F32, &dims),
                _ => {}
            }
        }
        t.call(&args);
        t.run()
    }
}

fn ramp(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "element {i}: {g} vs {w}"
        );
    }
}

use xf::XNodeUnion as U;

mod chunks;
mod views;

#[test]
fn binary_broadcast_and_clamp() {
    let mut g = Graph::default();
    let a = g.value(&[2, 3, 4], Kind::Input);
    let b = g.value(&[3, 1], Kind::Input);
    let o = g.value(&[2, 3, 4], Kind::Output);
    g.node(U::XNNMultiply, &[a, b, o, 0]);
    g.clamp(-0.25, 0.5);
    let (x, y) = (ramp(24, 1), ramp(3, 2));
    let out = g.run(&[x.clone(), y.clone()]).unwrap();
    let want: Vec<f32> = (0..24)
        .map(|i| (x[i] * y[(i / 4) % 3]).clamp(-0.25, 0.5))
        .collect();
    close(&out[0].f32(), &want);
}

#[test]
fn fully_connected_computes_only_the_selected_row() {
    // logits = FC(x) in the region, then select_copy(logits, 1, -1) outside it: the load step
    // finds the row demand and the fully-connected node writes only the last row (the others
    // keep the arena's zeros).
    let (m, k, n) = (4u32, 3u32, 5u32);
    let mut g = Graph::default();
    let x = g.value(&[1, m, k], Kind::Input);
    let wdata = ramp((k * n) as usize, 7);
    let w = g.value(&[n, k], Kind::Constant(wdata.clone()));
    let o = g.value(&[1, m, n], Kind::Output);
    g.node(U::XNNFullyConnected, &[x, w, INVALID_ID, o, 0]);
    let mut t = OpTest::delegate("XnnpackBackend", g.payload());
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let xd = ramp(m * k, 3);
    let xv = t.input_f32(&[1, m, k], &xd);
    let logits = t.intermediate_f32(&[1, m, n]);
    let out = t.output(DType::F32, &[1, n]);
    let (dim, index) = (t.int(1), t.int(-1));
    t.steps(&[
        Step::Kernel(String::new(), vec![xv, logits]),
        Step::Kernel(
            "aten::select_copy.int_out".into(),
            vec![logits, dim, index, out, out],
        ),
    ]);
    let r = t.run_inspect(&[logits]).unwrap();
    assert_eq!(r.demands.len(), 1);
    let row = |i: usize| -> Vec<f32> {
        (0..n)
            .map(|j| (0..k).map(|p| xd[i * k + p] * wdata[j * k + p]).sum())
            .collect()
    };
    close(&r.outputs[0].f32(), &row(m - 1));
    let y = r.tensors[0].f32();
    close(&y[(m - 1) * n..], &row(m - 1));
    assert!(y[..(m - 1) * n].iter().all(|&v| v == 0.0), "{y:?}");
}

#[test]
fn fully_connected_both_weight_layouts_with_bias() {
    let shapes = [
        (1, 1, 1),
        (3, 17, 5),
        (17, 3, 129),
        (4, 64, 48),
        (9, 24, 24),
    ];
    for (&(m, k, n), packing) in shapes.iter().flat_map(|s| [(s, false), (s, true)]) {
        for transpose in [false, true] {
            let mut g = Graph::default();
            let x = g.value(&[m, k], Kind::Input);
            let wdata = ramp((k * n) as usize, 7);
            let bdata = ramp(n as usize, 9);
            let wdims = if transpose { [k, n] } else { [n, k] };
            let w = g.value(&wdims, Kind::Constant(wdata.clone()));
            let bias = g.value(&[n], Kind::Constant(bdata.clone()));
            let o = g.value(&[m, n], Kind::Output);
            if packing {
                // Through an internal value: a product whose output only the program reads
                // keeps its filter's own rows (it may compute just the rows read).
                let y = g.value(&[m, n], Kind::Internal);
                let zero = g.value(&[n], Kind::Constant(vec![0.0; n as usize]));
                g.node(U::XNNFullyConnected, &[x, w, bias, y, transpose as u32]);
                g.node(U::XNNAdd, &[y, zero, o, 0]);
            } else {
                g.node(U::XNNFullyConnected, &[x, w, bias, o, transpose as u32]);
            }
            let xd = ramp((m * k) as usize, 3);
            let out = if packing {
                g.run_packing(core::slice::from_ref(&xd)).unwrap()
            } else {
                g.run(core::slice::from_ref(&xd)).unwrap()
            };
            let (m, k, n) = (m as usize, k as usize, n as usize);
            let mut want = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut acc = bdata[j];
                    for p in 0..k {
                        let wv = if transpose {
                            wdata[p * n + j]
                        } else {
                            wdata[j * k + p]
                        };
                        acc += xd[i * k + p] * wv;
                    }
                    want[i * n + j] = acc;
                }
            }
            close(&out[0].f32(), &want);
        }
    }
}

/// A filter that two fully-connected nodes read (one of them through a transposed view of the
/// same square constant) and a filter that an elementwise node also reads: packed at load
/// only where every reader is a product with the same orientation, and the outputs agree with
/// the in-place run and the reference.
#[test]
fn filters_packed_at_load_only_when_every_reader_takes_the_panels() {
    let (m, k) = (5u32, 12u32);
    let mut g = Graph::default();
    let x = g.value(&[m, k], Kind::Input);
    let wa = ramp((k * k) as usize, 11);
    let wb = ramp((k * k) as usize, 13);
    let shared = g.value(&[k, k], Kind::Constant(wa.clone()));
    let also_added = g.value(&[k, k], Kind::Constant(wb.clone()));
    let (o1, o2, o3) = (
        g.value(&[m, k], Kind::Output),
        g.value(&[m, k], Kind::Output),
        g.value(&[m, k], Kind::Output),
    );
    let o4 = g.value(&[k, k], Kind::Output);
    let o5 = g.value(&[m, k], Kind::Output);
    g.node(U::XNNFullyConnected, &[x, shared, INVALID_ID, o1, 0]);
    g.node(U::XNNFullyConnected, &[x, shared, INVALID_ID, o2, 0]);
    g.node(U::XNNFullyConnected, &[x, also_added, INVALID_ID, o3, 1]);
    g.node(U::XNNAdd, &[also_added, also_added, o4, 0]);
    // The shared constant read both ways: not packed (one layout cannot serve both).
    g.node(U::XNNFullyConnected, &[x, shared, INVALID_ID, o5, 1]);
    let xd = ramp((m * k) as usize, 3);
    let plain = g.run(core::slice::from_ref(&xd)).unwrap();
    let packing = g.run_packing(core::slice::from_ref(&xd)).unwrap();
    let (m, k) = (m as usize, k as usize);
    let product = |w: &[f32], t: bool| -> Vec<f32> {
        let mut o = vec![0f32; m * k];
        for i in 0..m {
            for j in 0..k {
                o[i * k + j] = (0..k)
                    .map(|p| xd[i * k + p] * if t { w[p * k + j] } else { w[j * k + p] })
                    .sum();
            }
        }
        o
    };
    let sum: Vec<f32> = wb.iter().map(|v| v + v).collect();
    let want = [
        product(&wa, false),
        product(&wa, false),
        product(&wb, true),
        sum,
        product(&wa, true),
    ];
    for run in [&plain, &packing] {
        for (got, want) in run.iter().zip(&want) {
            close(&got.f32(), want);
        }
    }
    // Only `shared` would be packable by its first two readers; the fifth reads it the other
    // way round, so nothing is packed and both registries need the same state.
    let program = |r: Registry<'static>| {
        let mut t = OpTest::delegate("XnnpackBackend", g.payload()).with_registry(r);
        let xv = t.input_f32(&[m, k], &xd);
        let outs: Vec<i32> = [[m, k], [m, k], [m, k], [k, k], [m, k]]
            .iter()
            .map(|d| t.output(DType::F32, d))
            .collect();
        let mut args = vec![xv];
        args.extend(outs);
        t.call(&args);
        t.metadata_bytes().unwrap()
    };
    assert_eq!(program(Registry::standard()), program(Registry::packing()));
}

#[test]
fn filters_packed_at_load_take_state_memory() {
    // One [24, 40] filter read by one product whose output another node reads: the packing
    // state holds its panels. Read by a product whose output only the program reads (which
    // may compute one row of it): kept in place.
    let (m, k, n) = (7u32, 40u32, 24u32);
    let mut g = Graph::default();
    let x = g.value(&[m, k], Kind::Input);
    let w = g.value(&[n, k], Kind::Constant(ramp((k * n) as usize, 5)));
    let head = g.value(&[n, k], Kind::Constant(ramp((k * n) as usize, 6)));
    let y = g.value(&[m, n], Kind::Internal);
    let o = g.value(&[m, n], Kind::Output);
    let logits = g.value(&[m, n], Kind::Output);
    g.node(U::XNNFullyConnected, &[x, w, INVALID_ID, y, 0]);
    g.node(U::XNNAdd, &[y, y, o, 0]);
    g.node(U::XNNFullyConnected, &[x, head, INVALID_ID, logits, 0]);
    let bytes = |r: Registry<'static>| {
        let mut t = OpTest::delegate("XnnpackBackend", g.payload()).with_registry(r);
        let xv = t.input_f32(&[m as usize, k as usize], &ramp((m * k) as usize, 1));
        let ov = t.output(DType::F32, &[m as usize, n as usize]);
        let lv = t.output(DType::F32, &[m as usize, n as usize]);
        t.call(&[xv, ov, lv]);
        t.metadata_bytes().unwrap()
    };
    let (plain, packing) = (bytes(Registry::standard()), bytes(Registry::packing()));
    let filter = (k * n * 4) as usize;
    assert!(
        packing >= plain + filter && packing < plain + 2 * filter,
        "{plain} B in place, {packing} B packing"
    );
}

#[test]
fn chain_of_internal_values_uses_planned_scratch() {
    // x -> transpose -> reshape -> softmax -> tanh -> out, with internal intermediates.
    let mut g = Graph::default();
    let x = g.value(&[2, 3, 5], Kind::Input);
    let t = g.value(&[3, 2, 5], Kind::Internal);
    let r = g.value(&[6, 5], Kind::Internal);
    let s = g.value(&[6, 5], Kind::Internal);
    let o = g.value(&[6, 5], Kind::Output);
    g.node(U::XNNStaticTranspose, &[x, t, 1, 0, 2]);
    g.node(U::XNNStaticReshape, &[t, r, 6, 5]);
    g.node(U::XNNSoftmax, &[r, s]);
    g.node(U::XNNTanh, &[s, o]);
    let xd = ramp(30, 5);
    let out = g.run(core::slice::from_ref(&xd)).unwrap();
    let mut want = vec![0f32; 30];
    for i in 0..3 {
        for j in 0..2 {
            let row: Vec<f32> = (0..5).map(|c| xd[(j * 3 + i) * 5 + c]).collect();
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = row.iter().map(|v| (v - m).exp()).collect();
            let sum: f32 = e.iter().sum();
            for c in 0..5 {
                want[(i * 2 + j) * 5 + c] = (e[c] / sum).tanh();
            }
        }
    }
    close(&out[0].f32(), &want);
}

#[test]
fn batch_matmul_slice_concat() {
    let mut g = Graph::default();
    let a = g.value(&[2, 3, 4], Kind::Input);
    let b = g.value(&[2, 4, 5], Kind::Input);
    let p = g.value(&[2, 3, 5], Kind::Internal);
    let s = g.value(&[2, 2, 5], Kind::Internal);
    let o = g.value(&[2, 5, 5], Kind::Output);
    g.node(U::XNNBatchMatrixMultiply, &[a, b, p, 0]);
    g.node(U::XNNStaticSlice, &[p, s, 0, 1, 0, 2, 2, 5]);
    g.node(U::XNNConcatenate2, &[1, p, s, INVALID_ID, o]);
    let (ad, bd) = (ramp(24, 11), ramp(40, 12));
    let out = g.run(&[ad.clone(), bd.clone()]).unwrap();
    let mut prod = [0f32; 30];
    for bt in 0..2 {
        for i in 0..3 {
            for j in 0..5 {
                prod[bt * 15 + i * 5 + j] = (0..4)
                    .map(|k| ad[bt * 12 + i * 4 + k] * bd[bt * 20 + k * 5 + j])
                    .sum();
            }
        }
    }
    let mut want = Vec::new();
    for bt in 0..2 {
        want.extend_from_slice(&prod[bt * 15..bt * 15 + 15]);
        want.extend_from_slice(&prod[bt * 15 + 5..bt * 15 + 15]);
    }
    close(&out[0].f32(), &want);
}

#[test]
fn conv_and_pooling_nhwc() {
    // 1x5x5x2 input, 3x3 conv stride 2 pad 1 → 1x3x3x4, then 2x2 max pool stride 1 → 1x2x2x4.
    let mut g = Graph::default();
    let x = g.value(&[1, 5, 5, 2], Kind::Input);
    let wdata = ramp(4 * 3 * 3 * 2, 21);
    let bdata = ramp(4, 22);
    let w = g.value(&[4, 3, 3, 2], Kind::Constant(wdata.clone()));
    let bias = g.value(&[4], Kind::Constant(bdata.clone()));
    let c = g.value(&[1, 3, 3, 4], Kind::Internal);
    let o = g.value(&[1, 2, 2, 4], Kind::Output);
    g.node(
        U::XNNConv2d,
        &[1, 1, 1, 1, 3, 3, 2, 2, 1, 1, 2, 4, 1, x, w, bias, c],
    );
    g.node(U::XNNMaxPooling2d, &[0, 0, 0, 0, 2, 2, 1, 1, 1, 1, c, o]);
    let xd = ramp(50, 23);
    let out = g.run(core::slice::from_ref(&xd)).unwrap();
    let mut conv = [0f32; 36];
    for oy in 0..3 {
        for ox in 0..3 {
            for oc in 0..4 {
                let mut acc = bdata[oc];
                for ky in 0..3 {
                    for kx in 0..3 {
                        let (iy, ix) = (
                            oy as isize * 2 + ky as isize - 1,
                            ox as isize * 2 + kx as isize - 1,
                        );
                        if (0..5).contains(&iy) && (0..5).contains(&ix) {
                            for ic in 0..2 {
                                acc += xd[((iy * 5 + ix) * 2) as usize + ic]
                                    * wdata[((oc * 3 + ky) * 3 + kx) * 2 + ic];
                            }
                        }
                    }
                }
                conv[(oy * 3 + ox) * 4 + oc] = acc;
            }
        }
    }
    let mut want = [0f32; 16];
    for oy in 0..2 {
        for ox in 0..2 {
            for ch in 0..4 {
                let mut m = f32::NEG_INFINITY;
                for ky in 0..2 {
                    for kx in 0..2 {
                        m = m.max(conv[((oy + ky) * 3 + ox + kx) * 4 + ch]);
                    }
                }
                want[(oy * 2 + ox) * 4 + ch] = m;
            }
        }
    }
    close(&out[0].f32(), &want);
}

#[test]
fn transposed_convolution_nhwc() {
    // 1x3x4x4 input, 3x3 transposed conv, stride 2, pad 1, adjustment (1, 0), 2 groups of
    // 2 → 2 channels: output 1x6x7x4; then a wrong output size is refused at load.
    let (h, w, c, oc, groups) = (3usize, 4usize, 4usize, 4usize, 2usize);
    let (oh, ow) = (6usize, 7usize);
    let u = |v: usize| v as u32;
    let build = |out_dims: &[u32]| {
        let mut g = Graph::default();
        let x = g.value(&[1, u(h), u(w), u(c)], Kind::Input);
        let wv = g.value(
            &[u(oc), 3, 3, u(c / groups)],
            Kind::Constant(ramp(oc * 9 * 2, 31)),
        );
        let bias = g.value(&[u(oc)], Kind::Constant(ramp(oc, 32)));
        let o = g.value(out_dims, Kind::Output);
        g.node(
            U::XNNConvTranspose2d,
            &[1, 1, 1, 1, 3, 3, 2, 2, 1, 1, 2, 2, 2, 1, 0, x, wv, bias, o],
        );
        g
    };
    let xd = ramp(h * w * c, 33);
    let (wdata, bdata) = (ramp(oc * 9 * 2, 31), ramp(oc, 32));
    let out = build(&[1, u(oh), u(ow), u(oc)])
        .run(core::slice::from_ref(&xd))
        .unwrap();
    let mut want = vec![0f32; oh * ow * oc];
    for px in want.chunks_exact_mut(oc) {
        px.copy_from_slice(&bdata);
    }
    for iy in 0..h {
        for ix in 0..w {
            for ic in 0..c {
                let (gi, i) = (ic / 2, ic % 2);
                for o in 0..2 {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (oy, ox) = ((iy * 2 + ky) as isize - 1, (ix * 2 + kx) as isize - 1);
                            if (0..oh as isize).contains(&oy) && (0..ow as isize).contains(&ox) {
                                let oc_ = gi * 2 + o;
                                want[(oy as usize * ow + ox as usize) * oc + oc_] += xd
                                    [(iy * w + ix) * c + ic]
                                    * wdata[((oc_ * 3 + ky) * 3 + kx) * 2 + i];
                            }
                        }
                    }
                }
            }
        }
    }
    close(&out[0].f32(), &want);
    match build(&[1, u(oh), u(ow + 1), u(oc)]).run(core::slice::from_ref(&xd)) {
        Err(Error::DelegateInit { detail, .. }) => {
            assert!(
                detail.as_str().contains("transposed convolution"),
                "{detail}"
            )
        }
        other => panic!("expected a load error, got {:?}", other.map(|_| ())),
    }
}

fn load_error(g: &Graph) -> std::string::String {
    match g.run(&[ramp(6, 1)]) {
        Err(Error::DelegateInit {
            backend, detail, ..
        }) => {
            assert_eq!(backend.as_str(), "XnnpackBackend");
            std::string::String::from(detail.as_str())
        }
        other => panic!(
            "expected a delegate load error, got {:?}",
            other.map(|_| ())
        ),
    }
}

fn simple() -> Graph {
    let mut g = Graph::default();
    let x = g.value(&[2, 3], Kind::Input);
    let o = g.value(&[2, 3], Kind::Output);
    g.node(U::XNNTanh, &[x, o]);
    g
}

#[test]
fn corrupted_payloads_are_load_errors() {
    assert!(simple().run(&[ramp(6, 1)]).is_ok());
    let mut g = simple();
    g.bad_magic = true;
    assert!(load_error(&g).contains("identifier"), "bad magic");
    let mut g = simple();
    g.nodes[0].1[0] = 7;
    assert!(load_error(&g).contains("out of bounds"), "missing value");
    let mut g = simple();
    g.vals[1].dims = vec![3, 3];
    assert!(load_error(&g).contains("dims"), "dims mismatch");
    let mut g = Graph::default();
    let x = g.value(&[2, 3], Kind::Input);
    let c = g.value(&[2, 3], Kind::Constant(ramp(6, 2)));
    let o = g.value(&[2, 3], Kind::Output);
    g.node(U::XNNAdd, &[x, c, o, 0]);
    assert!(g.run(&[ramp(6, 1)]).is_ok());
    g.constant_offset_bias = 4096;
    assert!(load_error(&g).contains("past the end"), "constant offset");
    let mut g = simple();
    g.vals[1].ext = 0;
    assert!(
        load_error(&g).contains("same external"),
        "an input and an output naming one argument"
    );
    let mut g = simple();
    g.nodes[0].0 = U::XNNScaledDotProductAttention;
    assert!(
        load_error(&g).contains("XNNScaledDotProductAttention"),
        "unsupported node is named"
    );
}

#[test]
fn constant_pad_places_the_input_block() {
    let mut g = Graph::default();
    let x = g.value(&[2, 3], Kind::Input);
    let o = g.value(&[3, 6], Kind::Output);
    g.node(
        U::XNNStaticConstantPad,
        &[x, o, 1.5f32.to_bits(), 1, 2, 0, 1],
    );
    let xd = ramp(6, 31);
    let out = g.run(core::slice::from_ref(&xd)).unwrap();
    let mut want = [1.5f32; 18];
    for i in 0..2 {
        for j in 0..3 {
            want[(i + 1) * 6 + j + 2] = xd[i * 3 + j];
        }
    }
    close(&out[0].f32(), &want);
}

#[test]
fn slice_pad_concat_blocks_against_index_arithmetic() {
    // Blocks of ranks 1-4 at random offsets, with trailing dims that are whole (merged into
    // longer runs) or not, runs of 4/8/12/16 (inline copies) and others.
    use super::run;
    use crate::shape::{NdIndex, Shape};
    let mut rng = crate::testing::Rng(0x51_1C);
    for case in 0..400 {
        let rank = 1 + case % 4;
        let outer: Vec<usize> = (0..rank).map(|_| 1 + rng.below(9) as usize).collect();
        let mut block = Vec::new();
        let mut offs = Vec::new();
        for &o in &outer {
            let whole = rng.below(2) == 0;
            let b = if whole {
                o
            } else {
                1 + rng.below(o as u64) as usize
            };
            let off = rng.below((o - b + 1) as u64) as usize;
            block.push(b);
            offs.push(off as u32);
        }
        let (os, bs) = (Shape::new(&outer).unwrap(), Shape::new(&block).unwrap());
        let x = rng.vec(os.numel());
        let ost = os.strides();
        let at = |idx: &[usize]| -> usize {
            idx.iter()
                .enumerate()
                .map(|(d, &i)| (i + offs[d] as usize) * ost[d])
                .sum()
        };
        // Slice: out[i] = x[i + offsets].
        let mut got = std::vec![f32::NAN; bs.numel()];
        run::slice(&x, &os, &offs, &mut got, &bs);
        let mut it = NdIndex::new(&block);
        for (j, g) in got.iter().enumerate() {
            assert_eq!(
                *g,
                x[at(it.index())],
                "slice {outer:?} {block:?} {offs:?} at {j}"
            );
            it.advance();
        }
        // Pad: the block placed at the offsets inside a tensor of `value`.
        let mut padded = std::vec![f32::NAN; os.numel()];
        run::pad(&got, &bs, &offs, -2.0, &mut padded, &os);
        let mut want = std::vec![-2.0f32; os.numel()];
        let mut it = NdIndex::new(&block);
        for g in &got {
            want[at(it.index())] = *g;
            it.advance();
        }
        assert_eq!(padded, want, "pad {outer:?} {block:?} {offs:?}");
        // Concat of the block with itself along a random axis.
        let axis = rng.below(rank as u64) as usize;
        let mut cd = block.clone();
        cd[axis] *= 2;
        let cs = Shape::new(&cd).unwrap();
        let mut cat = std::vec![f32::NAN; cs.numel()];
        run::concat(&[(&got, bs), (&got, bs)], axis, &mut cat, &cs);
        let inner: usize = block[axis..].iter().product();
        for (k, c) in cat.chunks(inner).enumerate() {
            let src = (k / 2) * inner;
            assert_eq!(c, &got[src..src + inner], "concat {block:?} axis {axis}");
        }
    }
}

#[test]
fn transposes_against_index_arithmetic() {
    // Random permutations of ranks 2-4, many keeping the last dim (head splits: contiguous
    // runs of 1-17 floats, the 4-16 ones copied inline), against the definition.
    use super::run;
    use crate::shape::{NdIndex, Shape};
    let mut rng = crate::testing::Rng(0x7A_11);
    // Alone, and on teams of 2-4 cores (whole blocks across cores).
    let teams: Vec<crate::testing::CountingTeam> =
        (2..=4).map(crate::testing::CountingTeam::new).collect();
    for case in 0..400 {
        let rank = 2 + case % 3;
        let dims: Vec<usize> = (0..rank).map(|_| 1 + rng.below(17) as usize).collect();
        let mut perm: Vec<u8> = (0..rank as u8).collect();
        let keep_last = rng.below(2) == 0;
        let m = if keep_last { rank - 1 } else { rank };
        for i in (1..m).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            perm.swap(i, j);
        }
        let xs = Shape::new(&dims).unwrap();
        let x = rng.vec(xs.numel());
        let od: Vec<usize> = perm.iter().map(|&p| dims[p as usize]).collect();
        let mut got = std::vec![f32::NAN; x.len()];
        match case % 4 {
            0 => run::transpose(&x, &xs, &perm, &mut got),
            t => {
                crate::parallel::scoped(&teams[t - 1], || run::transpose(&x, &xs, &perm, &mut got))
            }
        }
        let st = xs.strides();
        let mut it = NdIndex::new(&od);
        for (j, g) in got.iter().enumerate() {
            let src: usize = it
                .index()
                .iter()
                .zip(&perm)
                .map(|(&i, &p)| i * st[p as usize])
                .sum();
            assert_eq!(*g, x[src], "{dims:?} perm {perm:?} at {j}");
            it.advance();
        }
    }
}

/// `softmax(c·t)` with `c` a one-element value (a constant, or a region input read at run
/// time, negative too): the multiply folds into the softmax (the product takes no scratch)
/// and the outputs are the formula's. With a clamp on the multiply it stays a node of its
/// own, with the same outputs.
#[test]
fn multiply_by_one_element_folds_into_the_softmax_after_it() {
    let xd = ramp(21, 13);
    let build = |c: Option<f32>, clamped: bool| {
        let mut g = Graph::default();
        let x = g.value(&[3, 7], Kind::Input);
        let cv = match c {
            Some(v) => g.value(&[1], Kind::Constant(vec![v])),
            None => g.value(&[1], Kind::Input),
        };
        let t = g.value(&[3, 7], Kind::Internal);
        let y = g.value(&[3, 7], Kind::Internal);
        let o = g.value(&[3, 7], Kind::Output);
        g.node(U::XNNTanh, &[x, t]);
        g.node(U::XNNMultiply, &[t, cv, y, 0]);
        if clamped {
            g.clamp(-100.0, 100.0);
        }
        g.node(U::XNNSoftmax, &[y, o]);
        g
    };
    let want = |c: f32| -> Vec<f32> {
        let mut w = vec![0f32; 21];
        for r in 0..3 {
            let row: Vec<f64> = (0..7)
                .map(|j| (xd[r * 7 + j] as f64).tanh() * c as f64)
                .collect();
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
            for j in 0..7 {
                w[r * 7 + j] = ((row[j] - m).exp() / sum) as f32;
            }
        }
        w
    };
    for c in [0.125f32, 2.5] {
        close(
            &build(Some(c), false)
                .run(core::slice::from_ref(&xd))
                .unwrap()[0]
                .f32(),
            &want(c),
        );
        close(
            &build(Some(c), true)
                .run(core::slice::from_ref(&xd))
                .unwrap()[0]
                .f32(),
            &want(c),
        );
    }
    for c in [0.25f32, -0.5] {
        let out = build(None, false).run(&[xd.clone(), vec![c]]).unwrap();
        close(&out[0].f32(), &want(c));
    }
    let scratch = |g: &Graph| {
        let mut t = OpTest::delegate("XnnpackBackend", g.payload());
        let xv = t.input_f32(&[3, 7], &xd);
        let ov = t.output(DType::F32, &[3, 7]);
        t.call(&[xv, ov]);
        t.kernel_scratch_bytes().unwrap()
    };
    assert!(scratch(&build(Some(0.125), false)) < scratch(&build(Some(0.125), true)));
    // The product read by another node too: no fold (that node needs the product).
    let mut g = Graph::default();
    let x = g.value(&[3, 7], Kind::Input);
    let cv = g.value(&[1], Kind::Constant(vec![0.5]));
    let t = g.value(&[3, 7], Kind::Internal);
    let y = g.value(&[3, 7], Kind::Internal);
    let o = g.value(&[3, 7], Kind::Output);
    let o2 = g.value(&[3, 7], Kind::Output);
    g.node(U::XNNTanh, &[x, t]);
    g.node(U::XNNMultiply, &[t, cv, y, 0]);
    g.node(U::XNNSoftmax, &[y, o]);
    g.node(U::XNNTanh, &[y, o2]);
    let out = g.run(core::slice::from_ref(&xd)).unwrap();
    close(&out[0].f32(), &want(0.5));
    let w2: Vec<f32> = xd.iter().map(|&v| (v.tanh() * 0.5).tanh()).collect();
    close(&out[1].f32(), &w2);
}

#[test]
fn a_value_quantized_again_is_read_from_the_first_convert() {
    use super::plan::{DT_F32, DT_QD8, KIND_EXTERNAL_IN, KIND_EXTERNAL_OUT, KIND_INTERNAL};
    use crate::shape::Shape;
    // x and z inputs; y1, y2, y3, y4 the convert outputs (planned qdint8 below), y4 of other
    // dims, o an output.
    let mut g = Graph::default();
    let x = g.value(&[4, 16], Kind::Input);
    let z = g.value(&[4, 16], Kind::Input);
    let y1 = g.value(&[4, 16], Kind::Internal);
    let y2 = g.value(&[4, 16], Kind::Internal);
    let y3 = g.value(&[4, 16], Kind::Internal);
    let y4 = g.value(&[2, 32], Kind::Internal);
    let o = g.value(&[4, 16], Kind::Output);
    g.node(U::XNNConvert, &[x, y1]);
    g.node(U::XNNConvert, &[z, y3]);
    g.node(U::XNNConvert, &[x, y2]);
    g.node(U::XNNConvert, &[x, y4]);
    g.node(U::XNNConvert, &[x, o]);
    let payload = g.payload();
    let (graph, _, _) = super::graph_of(&payload).unwrap();
    let nodes = graph.xnodes().unwrap();
    let kind = |k| (k, 0, 0);
    let kinds = [
        kind(KIND_EXTERNAL_IN),
        kind(KIND_EXTERNAL_IN),
        kind(KIND_INTERNAL),
        kind(KIND_INTERNAL),
        kind(KIND_INTERNAL),
        kind(KIND_INTERNAL),
        kind(KIND_EXTERNAL_OUT),
    ];
    let q = |dt| (dt, 0, 0, false);
    let qinfo = [
        q(DT_F32),
        q(DT_F32),
        q(DT_QD8),
        q(DT_QD8),
        q(DT_QD8),
        q(DT_QD8),
        q(DT_QD8),
    ];
    let dims: Vec<Shape> = g
        .vals
        .iter()
        .map(|v| {
            let mut s = Shape::scalar();
            for &d in &v.dims {
                s.push(d as usize).unwrap();
            }
            s
        })
        .collect();
    let r = super::fold::repeated_converts(&nodes, &kinds, &qinfo, &dims).unwrap();
    // Only the third node: z is another value, y4 has other dims, o is not an intermediate.
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].step, r[0].first, r[0].out), (2, y1, y2));
    // An fp32 → fp32 copy of the same input is no quantization.
    let f32s = [q(DT_F32); 7];
    assert!(super::fold::repeated_converts(&nodes, &kinds, &f32s, &dims)
        .unwrap()
        .is_empty());
}
