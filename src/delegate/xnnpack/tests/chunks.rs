//! Regions run in chunks of rows ([`crate::delegate::xnnpack::chunk`]): when they are, and the
//! same bits as all rows at once.

use super::*;
use crate::delegate::xnnpack::chunk;
use crate::delegate::xnnpack::plan::*;
use crate::shape::Shape;

/// `o = tanh(x·c) + s) · x + x·c` on `[1, rows, cols]`, with a constant `c` of `[cols]` and
/// a one-element input `s` broadcast along the rows. `extra` adds a transpose of another
/// input into another output: a node that is no row operator, so the region is never
/// chunked.
fn region(rows: u32, cols: u32, extra: bool) -> Graph {
    let mut g = Graph::default();
    let x = g.value(&[1, rows, cols], Kind::Input);
    let s = g.value(&[1], Kind::Input);
    let c = g.value(&[cols], Kind::Constant(ramp(cols as usize, 7)));
    let t: Vec<u32> = (0..4)
        .map(|_| g.value(&[1, rows, cols], Kind::Internal))
        .collect();
    let o = g.value(&[1, rows, cols], Kind::Output);
    g.node(U::XNNMultiply, &[x, c, t[0], 0]);
    g.node(U::XNNTanh, &[t[0], t[1]]);
    g.node(U::XNNAdd, &[t[1], s, t[2], 0]);
    g.node(U::XNNMultiply, &[t[2], x, t[3], 0]);
    g.node(U::XNNAdd, &[t[3], t[0], o, 0]);
    if extra {
        let y = g.value(&[2, 3], Kind::Input);
        let yo = g.value(&[3, 2], Kind::Output);
        g.node(U::XNNStaticTranspose, &[y, yo, 1, 0]);
    }
    g
}

/// What [`chunk::plan`] decides for `g`: (chunks, rows of each value after it).
fn decide(g: &Graph) -> (usize, Vec<Option<usize>>) {
    let payload = g.payload();
    let (graph, _, _) = crate::delegate::xnnpack::graph_of(&payload).unwrap();
    let nodes = graph.xnodes().unwrap();
    let mut dims: Vec<Shape> = g
        .vals
        .iter()
        .map(|v| Shape::from_u32(&v.dims).unwrap())
        .collect();
    let mut kinds: Vec<(u32, u32, u64)> = g
        .vals
        .iter()
        .zip(&dims)
        .map(|(v, d)| match v.kind {
            Kind::Input => (KIND_EXTERNAL_IN, v.ext, 0),
            Kind::Output => (KIND_EXTERNAL_OUT, v.ext, 0),
            Kind::Internal => (KIND_INTERNAL, 0, d.numel() as u64 * 4),
            Kind::Constant(_) => (KIND_CONSTANT, 0, 0),
        })
        .collect();
    let qinfo = vec![(DT_F32, 0, 0, false); dims.len()];
    let c = chunk::plan(&nodes, &mut kinds, &mut dims, &qinfo).unwrap();
    let rows = dims
        .iter()
        .map(|d| (d.rank() == 3).then(|| d.dims()[1]))
        .collect();
    (c.count, rows)
}

#[test]
fn large_row_regions_run_in_chunks_of_rows() {
    // 4 intermediates of 64 × 2,048 floats (2 MiB): two chunks of 32 rows (1 MiB).
    let (count, rows) = decide(&region(64, 2048, false));
    assert_eq!(count, 2);
    assert_eq!(rows[0], Some(32), "the input's dims are one chunk's");
    assert!(rows.iter().flatten().all(|&r| r == 32));
    // 96 rows: 48-row chunks would take 1.5 MiB, so three of 32.
    assert_eq!(decide(&region(96, 2048, false)).0, 3);
    // Small intermediates (256 KiB), a prime row count, a node that is no row operator:
    // all rows at once.
    assert_eq!(decide(&region(64, 256, false)).0, 1);
    assert_eq!(decide(&region(67, 2048, false)).0, 1);
    let (count, rows) = decide(&region(64, 2048, true));
    assert_eq!(count, 1);
    assert_eq!(rows[0], Some(64));
}

#[test]
fn chunked_regions_give_the_same_bits_as_all_rows_at_once() {
    for rows in [64u32, 96] {
        let cols = 2048u32;
        let n = (rows * cols) as usize;
        let (x, s, y) = (ramp(n, 3), vec![0.375f32], ramp(6, 4));
        let chunked = region(rows, cols, false)
            .run(&[x.clone(), s.clone()])
            .unwrap();
        let whole = region(rows, cols, true).run(&[x.clone(), s, y]).unwrap();
        let (a, b) = (chunked[0].f32(), whole[0].f32());
        assert_eq!(a.len(), n);
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            assert_eq!(p.to_bits(), q.to_bits(), "{rows} rows: element {i}");
        }
        let c = ramp(cols as usize, 7);
        let want: Vec<f32> = (0..n)
            .map(|i| {
                let xc = x[i] * c[i % cols as usize];
                (xc.tanh() + 0.375) * x[i] + xc
            })
            .collect();
        close(&a, &want);
    }
}
