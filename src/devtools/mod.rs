//! Developer tools that ExecuTorch's own devtools read: ETDump profiles ([`etdump`]) and
//! BundledProgram self-tests ([`bundled`]: the runner; the file reader is `format::bundled`).
//! Everything here works without a heap, on caller-provided buffers, so a bare-metal image
//! can use it as well as the host tools.

pub mod bundled;
pub mod etdump;
