//! What the 3×3 depthwise vector kernels (`neon_3x3` and its SVE2 counterpart `sve_3x3`)
//! share: whether a call is theirs, and which kernel rows an output row uses.

use crate::linalg::conv::Conv2d;

/// The first input element of image `b` when the 3×3 vector kernels take this call (3×3
/// filter, dilation 1, stride 1 or 2 across, any stride down, at least one channel, and every
/// operand long enough for the image; the channel multiplier is the caller's check), `None`
/// otherwise.
pub(super) fn accepts(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
    b: usize,
) -> Option<usize> {
    let s = p.stride_w;
    if p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || !(s == 1 || s == 2) {
        return None;
    }
    let c = p.in_c;
    let img = b * p.in_h * p.in_w;
    let ok = c > 0
        && x.len() >= (img + p.in_h * p.in_w) * c
        && w.len() >= 9 * c
        && out.len() >= p.out_h * p.out_w * c
        && bias.is_none_or(|bb| bb.len() >= c);
    ok.then_some(img)
}

/// The valid kernel rows of output row `oy` of a 3×3, dilation-1 filter: the first, how many
/// (they are consecutive, and so are the input rows they read), and the input row the first
/// reads (0 when none is valid).
pub(super) fn valid_rows(p: &Conv2d, oy: usize) -> (usize, usize, usize) {
    let mut valid = (0..3).filter_map(|ky| p.in_row(oy, ky).map(|iy| (ky, iy)));
    let Some((ky0, iy0)) = valid.next() else {
        return (0, 0, 0);
    };
    (ky0, 1 + valid.count(), iy0)
}
