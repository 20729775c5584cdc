//! Decodes the firmware's console stream (packet format in boards/firmware/src/console.rs):
//! defmt logs through defmt-decoder with the firmware's own ELF, text lines, output tensors and
//! the final report.

use anyhow::{bail, ensure, Context, Result};
use ptera::DType;

use crate::npy::HostTensor;

const SYNC: u8 = 0xA5;
const HELLO: &[u8] = b"\xA5\x06\x0a\x00ptera-fw/1";

pub struct Report {
    pub status: u32,
    pub cntfrq: u64,
    pub load_ticks: u64,
    pub execute_ticks: u64,
    pub el: u32,
    pub midr: u64,
    pub sve_vl_bits: u32,
    pub sme_svl_bits: u32,
    pub heap_used: u32,
    pub stack_used: u32,
    /// The GEMM micro-kernel ISA the engine selected on this core.
    pub isa: String,
    /// Cores that ran the forward (1 when the firmware does not say).
    pub cores: u32,
}

/// One BundledProgram test case checked on the board (channel 9).
pub struct CaseResult {
    pub method: String,
    pub index: u32,
    pub outputs: u32,
    pub mismatches: u64,
    pub worst: f64,
    pub worst_output: u32,
    pub worst_element: u64,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

#[derive(Default)]
pub struct Run {
    pub log: Vec<String>,
    pub text: Vec<String>,
    pub tensors: Vec<HostTensor>,
    pub report: Option<Report>,
    /// Payload of the GEMM bench packet (channel 7, firmware feature `gemm-bench`).
    pub bench: Option<Vec<u8>>,
    /// The forward's ETDump file (channel 8, firmware feature `etdump`; several packets).
    pub etdump: Option<Vec<u8>>,
    /// BundledProgram test cases the firmware ran (channel 9), in order.
    pub cases: Vec<CaseResult>,
    /// Why decoding stopped early, if it did.
    pub truncated: Option<String>,
}

impl Run {
    /// The error-level log lines and texts, or a note that there were none.
    pub fn summary(&self) -> String {
        let mut lines: Vec<&str> = self
            .log
            .iter()
            .filter(|l| l.contains("ERROR"))
            .map(String::as_str)
            .collect();
        lines.extend(self.text.iter().map(String::as_str));
        if let Some(t) = &self.truncated {
            lines.push(t);
        }
        if lines.is_empty() {
            "no error message (set DEFMT_LOG=info for more)".to_string()
        } else {
            lines.join("; ")
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        ensure!(self.b.len() >= n, "packet payload too short");
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

pub fn decode(stream: &[u8], elf: &[u8]) -> Result<Run> {
    let mut run = Run::default();
    let Some(start) = stream.windows(HELLO.len()).position(|w| w == HELLO) else {
        if !stream.is_empty() {
            run.truncated = Some(format!(
                "no ptera-fw hello in {} console bytes",
                stream.len()
            ));
        }
        return Ok(run);
    };
    let table = defmt_decoder::Table::parse(elf)
        .context("cannot read the firmware's defmt table")?
        .context("the firmware has no defmt table")?;
    let mut defmt = table.new_stream_decoder();
    let mut pending: Option<(u32, DType, Vec<usize>, Vec<u8>)> = None;
    let mut rest = &stream[start + HELLO.len()..];
    while !rest.is_empty() {
        if rest.len() < 4 || rest[0] != SYNC {
            run.truncated = Some(format!(
                "console stream broken {} bytes before its end",
                rest.len()
            ));
            break;
        }
        let (channel, len) = (rest[1], u16::from_le_bytes([rest[2], rest[3]]) as usize);
        if rest.len() < 4 + len {
            run.truncated = Some("console stream ends inside a packet".to_string());
            break;
        }
        let payload = &rest[4..4 + len];
        rest = &rest[4 + len..];
        let mut r = Reader { b: payload };
        match channel {
            0 => {
                defmt.received(payload);
                loop {
                    match defmt.decode() {
                        Ok(frame) => run.log.push(frame.display(false).to_string()),
                        Err(defmt_decoder::DecodeError::UnexpectedEof) => break,
                        Err(defmt_decoder::DecodeError::Malformed) => {
                            run.log.push("(malformed defmt frame)".to_string());
                            break;
                        }
                    }
                }
            }
            1 => {
                ensure!(pending.is_none(), "tensor header inside a tensor");
                let index = r.u32()?;
                let code = r.u8()?;
                let dtype = DType::from_scalar_type(code as i8)
                    .with_context(|| format!("output {index}: ScalarType {code}"))?;
                let rank = r.u8()? as usize;
                let dims = (0..rank)
                    .map(|_| r.u64().map(|d| d as usize))
                    .collect::<Result<Vec<_>>>()?;
                pending = Some((index, dtype, dims, Vec::new()));
            }
            2 => match &mut pending {
                Some(p) => p.3.extend_from_slice(payload),
                None => bail!("tensor data outside a tensor"),
            },
            3 => {
                let Some((index, dtype, shape, bytes)) = pending.take() else {
                    bail!("tensor end outside a tensor")
                };
                let (i, len, hash) = (r.u32()?, r.u64()?, r.u32()?);
                ensure!(
                    i == index && len as usize == bytes.len(),
                    "output {index}: {} bytes received, {len} sent",
                    bytes.len()
                );
                ensure!(
                    hash == fnv1a(&bytes),
                    "output {index}: checksum mismatch on the console"
                );
                ensure!(
                    index as usize == run.tensors.len(),
                    "output {index} out of order"
                );
                let numel: usize = shape.iter().product();
                ensure!(
                    numel * dtype.size() == bytes.len(),
                    "output {index}: {} bytes for shape {shape:?}",
                    bytes.len()
                );
                run.tensors.push(HostTensor {
                    dtype,
                    shape,
                    bytes,
                });
            }
            4 => {
                run.report = Some(Report {
                    status: r.u32()?,
                    cntfrq: r.u64()?,
                    load_ticks: r.u64()?,
                    execute_ticks: r.u64()?,
                    el: r.u32()?,
                    midr: r.u64()?,
                    sve_vl_bits: r.u32()?,
                    sme_svl_bits: r.u32()?,
                    heap_used: r.u32()?,
                    stack_used: r.u32()?,
                    isa: {
                        let n = r.u8()? as usize;
                        String::from_utf8_lossy(r.take(n)?).into_owned()
                    },
                    cores: r.u32().unwrap_or(1),
                });
            }
            5 => {
                let s = String::from_utf8_lossy(payload);
                match run.text.last_mut() {
                    Some(last) if !last.ends_with('\n') => last.push_str(&s),
                    _ => run.text.push(s.into_owned()),
                }
            }
            7 => run.bench = Some(payload.to_vec()),
            8 => run
                .etdump
                .get_or_insert_with(Vec::new)
                .extend_from_slice(payload),
            9 => {
                let index = r.u32()?;
                let outputs = r.u32()?;
                let mismatches = r.u64()?;
                let worst = f64::from_bits(r.u64()?);
                let worst_output = r.u32()?;
                let worst_element = r.u64()?;
                let n = r.u8()? as usize;
                let method = String::from_utf8_lossy(r.take(n)?).into_owned();
                run.cases.push(CaseResult {
                    method,
                    index,
                    outputs,
                    mismatches,
                    worst,
                    worst_output,
                    worst_element,
                });
            }
            other => bail!("unknown console channel {other}"),
        }
    }
    for t in &mut run.text {
        while t.ends_with('\n') {
            t.pop();
        }
    }
    Ok(run)
}
