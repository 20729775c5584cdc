//! Exact per-core instruction counts of one bare-metal forward, from qemu-system's execution
//! trace (`-d in_asm,exec,nochain`), for `cargo xtask qemu --icount [--smp N]`.
//!
//! Under `-icount` QEMU runs the cores one after another on one host thread, and its
//! instruction counter (also what the PMU's instructions-retired event reads there) is one for
//! the whole machine, so no guest register gives a core's own count. The trace does: QEMU logs
//! each translated block ("IN:" and its instructions) and, with chaining off, each execution
//! of a block ("Trace CPU: HOSTPTR [../PC/../..] symbol"). A block's length is taken from the
//! translation logged just before its first execution (keyed by QEMU's host pointer of the
//! block, so a re-translation of the same address, e.g. a one-instruction block after an I/O
//! access, keeps its own length). The counts are exact and repeat run to run.
//!
//! What is counted, between the firmware's marks `ptera_mark_forward_begin` / `_end` on core 0
//! (found by address: the entry points of those functions in the firmware's symbol table):
//! - each core's executed instructions (`per_core`), waiting loops included (QEMU's `WFE` only
//!   yields, so a waiting core executes a few instructions per scheduling round);
//! - the critical path: the instructions of core 0 outside parallel steps, plus, for every
//!   parallel step (core 0's marks `ptera_team_fork` .. `ptera_team_join` around one job of
//!   the engine's `SpinTeam`), the largest count of any core inside it. That is the forward's
//!   length when every core retires one instruction per cycle and a wait costs nothing while
//!   another core works: what `N` real cores would take, in instructions.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};

/// The mark functions' symbols, in the order of [`Marks`]' fields.
pub const MARK_SYMBOLS: [&str; 4] = [
    "ptera_mark_forward_begin",
    "ptera_mark_forward_end",
    "ptera_team_fork",
    "ptera_team_join",
];

/// Entry addresses of the mark functions (from the firmware's symbol table).
#[derive(Clone, Copy, Debug, Default)]
pub struct Marks {
    pub begin: u64,
    pub end: u64,
    pub fork: u64,
    pub join: u64,
    /// Entry of the engine's per-call dispatch (`exec::run::Frame::call`), when the firmware
    /// has it as a function of its own: each entry on core 0 starts the forward's next call.
    pub call: u64,
}

/// Prefix of the mangled symbol of `ptera::exec::run::Frame::call`.
const CALL_SYMBOL_PREFIX: &str = "_ZN5ptera4exec3run5Frame4call17h";

impl Marks {
    /// Looks the marks up in the firmware ELF (an image that never splits work may lack the
    /// fork/join marks: they then never match).
    pub fn from_elf(elf: &[u8]) -> Result<Marks> {
        let mut a = [u64::MAX; 4];
        for (i, (slot, name)) in a.iter_mut().zip(MARK_SYMBOLS).enumerate() {
            match super::elf::symbol(elf, name)? {
                Some(addr) => *slot = addr,
                None if i >= 2 => {}
                None => bail!("the firmware has no symbol {name}"),
            }
        }
        let distinct = (0..4).all(|i| (i + 1..4).all(|j| a[i] != a[j] || a[i] == u64::MAX));
        if !distinct {
            bail!("two mark functions share an address in the firmware (folded by the linker)");
        }
        let call = super::elf::functions(elf)?
            .into_iter()
            .find(|f| f.2.starts_with(CALL_SYMBOL_PREFIX))
            .map_or(u64::MAX, |f| f.0);
        Ok(Marks {
            begin: a[0],
            end: a[1],
            fork: a[2],
            join: a[3],
            call,
        })
    }
}

#[derive(Default)]
pub struct CoreCounter {
    marks: Marks,
    /// Host pointer of a translated block → its guest instructions.
    tb_len: HashMap<u64, u64>,
    /// Instructions of the "IN:" block being read, and of the last one complete and not yet
    /// executed.
    reading: Option<u64>,
    pending: Option<u64>,
    /// Threads of qemu-user: blocks keyed by their guest address (`by_pc`), see
    /// [`CoreCounter::for_user_threads`].
    by_pc: bool,
    /// Guest address of the "IN:" block being read, and block address → instructions.
    reading_pc: Option<u64>,
    pc_len: HashMap<u64, u64>,
    /// The marks were moved to the program's load address (`by_pc`).
    relocated: bool,
    /// 0 before the begin mark, 1 counting, 2 done.
    state: u8,
    per_core: Vec<u64>,
    /// Per-core counts at the last fork mark, while inside a parallel step.
    step_start: Option<Vec<u64>>,
    serial: u64,
    critical_in_steps: u64,
    steps: u64,
    /// Core 0's instructions outside parallel steps, by block address.
    serial_by_pc: HashMap<u64, u64>,
    /// Core 1's instructions inside parallel steps, by block address.
    step_by_pc: HashMap<u64, u64>,
    /// Calls of the forward entered so far (entries of [`Marks::call`] on core 0).
    calls: usize,
    /// Per call (index 0: before the first), see [`CoreCounts::by_call`].
    by_call: Vec<CallCount>,
    /// `serial_by_pc` counts this call only (`None`: all of the forward), and its steps are
    /// kept one by one (`call_steps`).
    only_call: Option<usize>,
    /// Core 0's last serial block addresses, newest last (what forked a step).
    recent: Vec<u64>,
    call_steps: Vec<StepCount>,
}

/// One parallel step of the call [`CoreCounter::only_call`] follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepCount {
    /// Core 0's last serial block addresses before the fork, newest last (the code that split
    /// the work is the newest one outside the team's own functions).
    pub before: Vec<u64>,
    /// Each core's instructions in the step.
    pub per_core: Vec<u64>,
}

/// What one call of the forward (one kernel or delegate call the engine dispatched) adds to
/// the critical path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCount {
    /// Core 0's instructions outside parallel steps.
    pub serial: u64,
    /// The longest core's instructions in each of its parallel steps, summed.
    pub in_steps: u64,
    /// Its parallel steps.
    pub steps: u64,
    /// Every core's instructions in its parallel steps, summed (against `in_steps`: how evenly
    /// the steps were split).
    pub in_steps_all: u64,
}

/// The counts of one forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreCounts {
    pub per_core: Vec<u64>,
    pub critical_path: u64,
    /// Parallel steps (jobs split across cores) in the forward.
    pub steps: u64,
    /// Core 0's instructions outside parallel steps, by block start address.
    pub serial_by_pc: HashMap<u64, u64>,
    /// Core 1's instructions inside parallel steps, by block start address (what a part
    /// costs a core that only runs parts: the work and the split's overhead).
    pub step_by_pc: HashMap<u64, u64>,
    /// Per dispatched call in execution order (entry 0: the forward's instructions before its
    /// first call); empty when the firmware has no separate dispatch function to mark calls.
    pub by_call: Vec<CallCount>,
    /// The steps of the call followed with [`CoreCounter::only_call`], in order.
    pub call_steps: Vec<StepCount>,
}

impl CoreCounts {
    /// The function holding `pc` (symbols `(address, size, name)` sorted by address).
    pub fn function_at(symbols: &[(u64, u64, String)], pc: u64) -> &str {
        let i = symbols.partition_point(|s| s.0 <= pc);
        i.checked_sub(1)
            .map(|i| &symbols[i])
            .filter(|s| pc < s.0 + s.1.max(1))
            .map_or("?", |s| s.2.as_str())
    }

    /// Core 0's serial instructions by function (symbols `(address, size, name)` sorted by
    /// address), largest first.
    pub fn serial_by_function(&self, symbols: &[(u64, u64, String)]) -> Vec<(String, u64)> {
        Self::by_function(&self.serial_by_pc, symbols)
    }

    /// Core 1's instructions inside parallel steps by function, largest first.
    pub fn step_by_function(&self, symbols: &[(u64, u64, String)]) -> Vec<(String, u64)> {
        Self::by_function(&self.step_by_pc, symbols)
    }

    fn by_function(
        by_pc: &HashMap<u64, u64>,
        symbols: &[(u64, u64, String)],
    ) -> Vec<(String, u64)> {
        let mut by: HashMap<&str, u64> = HashMap::new();
        for (&pc, &n) in by_pc {
            *by.entry(Self::function_at(symbols, pc)).or_default() += n;
        }
        let mut v: Vec<(String, u64)> = by.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}
impl CoreCounter {
    pub fn new(marks: Marks) -> CoreCounter {
        CoreCounter {
            marks,
            ..CoreCounter::default()
        }
    }

    /// The same counter with `serial_by_pc` restricted to call `k` (`None`: every call).
    pub fn only_call(mut self, k: Option<usize>) -> CoreCounter {
        self.only_call = k;
        self
    }

    /// For a qemu-user trace of several threads (`-d in_asm,exec,nochain`; a thread is a CPU
    /// of the trace, thread 0 the one that runs the forward): the threads run at once on
    /// their own host threads, so the first execution after a translation may be another
    /// thread's block. Blocks are keyed by their guest address (the first instruction of the
    /// "IN:" listing) instead; user mode has no I/O that would translate one address twice
    /// with different lengths.
    pub fn for_user_threads(marks: Marks) -> CoreCounter {
        CoreCounter {
            marks,
            by_pc: true,
            ..CoreCounter::default()
        }
    }

    fn close_block(&mut self) {
        if let Some(n) = self.reading.take() {
            if self.by_pc {
                if let Some(pc) = self.reading_pc.take() {
                    self.pc_len.insert(pc, n);
                }
            } else {
                self.pending = Some(n);
            }
        }
    }

    /// Feeds every line of a trace file or FIFO, as QEMU writes it.
    pub fn read_all(&mut self, f: std::fs::File) -> Result<()> {
        use std::io::BufRead;
        let mut r = std::io::BufReader::with_capacity(1 << 20, f);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if r.read_until(b'\n', &mut buf)? == 0 {
                return Ok(());
            }
            self.line(String::from_utf8_lossy(&buf).trim_end_matches('\n'))?;
        }
    }

    /// Feeds one line of the trace.
    pub fn line(&mut self, l: &str) -> Result<()> {
        if l.starts_with("IN:") {
            self.close_block();
            self.reading = Some(0);
        } else if l.starts_with("0x") {
            if let Some(n) = self.reading.as_mut() {
                if *n == 0 && self.by_pc {
                    let addr = l.trim_start_matches("0x").split(':').next().unwrap_or("");
                    self.reading_pc = u64::from_str_radix(addr, 16).ok();
                }
                *n += 1;
            }
        } else if let Some(rest) = l.strip_prefix("Trace ") {
            self.close_block();
            self.trace(rest)
                .with_context(|| format!("trace line `{l}`"))?;
        } else {
            self.close_block();
        }
        Ok(())
    }

    fn trace(&mut self, rest: &str) -> Result<()> {
        // "CPU: 0xHOST [cs_base/PC/flags/cflags] symbol"
        let (cpu, rest) = rest.split_once(": ").context("no CPU index")?;
        let cpu: usize = cpu.trim().parse().context("bad CPU index")?;
        let (host, rest) = rest.split_once(' ').context("no block pointer")?;
        let host =
            u64::from_str_radix(host.trim_start_matches("0x"), 16).context("bad block pointer")?;
        let fields = rest
            .split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .map(|(f, _)| f)
            .context("no block fields")?;
        let pc = fields.split('/').nth(1).context("no PC")?;
        let pc = u64::from_str_radix(pc, 16).context("bad PC")?;
        // A position-independent program runs at a load offset: its first entry into the
        // begin mark (found by the symbol QEMU prints) gives it, and every mark moves by it.
        if self.by_pc && self.state == 0 && !self.relocated {
            let sym = rest.split_once(']').map_or("", |(_, s)| s.trim());
            if sym == MARK_SYMBOLS[0] {
                let bias = pc.wrapping_sub(self.marks.begin);
                let m = &mut self.marks;
                for a in [
                    &mut m.begin,
                    &mut m.end,
                    &mut m.fork,
                    &mut m.join,
                    &mut m.call,
                ] {
                    if *a != u64::MAX {
                        *a = a.wrapping_add(bias);
                    }
                }
                self.relocated = true;
            }
        }
        let m = self.marks;
        let n = if self.by_pc {
            *self
                .pc_len
                .get(&pc)
                .context("a block executed before any translation of it")?
        } else {
            match self.pending.take() {
                Some(n) => {
                    self.tb_len.insert(host, n);
                    n
                }
                None => *self
                    .tb_len
                    .get(&host)
                    .context("a block executed before any translation of it")?,
            }
        };
        match self.state {
            0 => {
                if cpu == 0 && pc == m.begin {
                    self.state = 1;
                }
                return Ok(());
            }
            2 => return Ok(()),
            _ => {}
        }
        if cpu == 0 && pc == m.end {
            if self.step_start.is_some() {
                bail!("the forward ended inside a parallel step");
            }
            self.state = 2;
            return Ok(());
        }
        if self.per_core.len() <= cpu {
            self.per_core.resize(cpu + 1, 0);
        }
        if cpu == 0 && pc == m.call && self.step_start.is_none() {
            self.calls += 1;
        }
        if self.by_call.len() <= self.calls {
            self.by_call.resize(self.calls + 1, CallCount::default());
        }
        if cpu == 0 && pc == m.fork {
            if self.step_start.is_some() {
                bail!("a parallel step started inside another");
            }
            self.step_start = Some(self.per_core.clone());
        }
        self.per_core[cpu] += n;
        if cpu == 1 && self.step_start.is_some() && self.only_call.is_none_or(|k| k == self.calls) {
            *self.step_by_pc.entry(pc).or_default() += n;
        }
        if cpu == 0 && self.step_start.is_none() {
            self.serial += n;
            if self.only_call.is_none_or(|k| k == self.calls) {
                *self.serial_by_pc.entry(pc).or_default() += n;
            }
            if self.only_call == Some(self.calls) {
                if self.recent.len() == 16 {
                    self.recent.remove(0);
                }
                self.recent.push(pc);
            }
            self.by_call[self.calls].serial += n;
        }
        if cpu == 0 && pc == m.join {
            let start = self
                .step_start
                .take()
                .context("a parallel step ended that never started")?;
            let longest = self
                .per_core
                .iter()
                .enumerate()
                .map(|(c, &now)| now - start.get(c).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            self.critical_in_steps += longest;
            self.steps += 1;
            self.by_call[self.calls].in_steps += longest;
            self.by_call[self.calls].in_steps_all += self
                .per_core
                .iter()
                .enumerate()
                .map(|(c, &now)| now - start.get(c).copied().unwrap_or(0))
                .sum::<u64>();
            self.by_call[self.calls].steps += 1;
            if self.only_call == Some(self.calls) {
                self.call_steps.push(StepCount {
                    before: self.recent.clone(),
                    per_core: self
                        .per_core
                        .iter()
                        .enumerate()
                        .map(|(c, &now)| now - start.get(c).copied().unwrap_or(0))
                        .collect(),
                });
            }
        }
        Ok(())
    }

    /// The counts, once the end mark has been seen.
    pub fn finish(mut self, cores: usize) -> Result<CoreCounts> {
        self.close_block();
        if self.state != 2 {
            bail!("the forward marks were not found in the trace");
        }
        let mut per_core = self.per_core;
        per_core.resize(per_core.len().max(cores), 0);
        let by_call = if self.marks.call == u64::MAX {
            Vec::new()
        } else {
            self.by_call
        };
        Ok(CoreCounts {
            critical_path: self.serial + self.critical_in_steps,
            per_core,
            steps: self.steps,
            serial_by_pc: self.serial_by_pc,
            step_by_pc: self.step_by_pc,
            by_call,
            call_steps: self.call_steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Marks = Marks {
        begin: 0x4000_0000,
        end: 0x4000_0400,
        fork: 0x4000_0200,
        join: 0x4000_0300,
        call: u64::MAX,
    };

    fn feed(lines: &[&str]) -> Result<CoreCounts> {
        let mut c = CoreCounter::new(M);
        for l in lines {
            c.line(l)?;
        }
        c.finish(2)
    }

    #[test]
    fn counts_each_core_and_the_longest_core_per_step() {
        let t = |cpu: u32, host: u32, pc: u64| {
            format!("Trace {cpu}: 0x{host:x} [00000000/{pc:016x}/00000000/ff000000] ")
        };
        let work = 0x4000_0100;
        let lines = [
            "IN: ptera_mark_forward_begin".to_string(),
            "0x40000000:  d65f03c0  ret".to_string(),
            String::new(),
            t(0, 0x100, M.begin),
            "IN: work".to_string(),
            "0x40000100:  d503201f  nop".to_string(),
            "0x40000104:  d503201f  nop".to_string(),
            "0x40000108:  d65f03c0  ret".to_string(),
            t(0, 0x200, work), // serial: 3
            "IN: ptera_team_fork".to_string(),
            "0x40000200:  d65f03c0  ret".to_string(),
            t(0, 0x300, M.fork), // step: core 0 1
            t(0, 0x200, work),   // core 0 +3 = 4
            t(1, 0x200, work),
            t(1, 0x200, work), // core 1 6
            "IN: ptera_team_join".to_string(),
            "0x40000300:  d65f03c0  ret".to_string(),
            t(0, 0x400, M.join), // core 0 5; step max = 6
            t(0, 0x200, work),   // serial +3
            t(1, 0x200, work),   // core 1 outside a step
            "IN: ptera_mark_forward_end".to_string(),
            "0x40000400:  d65f03c0  ret".to_string(),
            t(0, 0x500, M.end),
            t(0, 0x200, work), // after the end: not counted
        ];
        let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        let c = feed(&refs).unwrap();
        assert_eq!(c.per_core, vec![3 + 1 + 3 + 1 + 3, 9]);
        assert_eq!(c.critical_path, 3 + 6 + 3);
        assert_eq!(c.steps, 1);
    }

    /// Core `cpu` executes the block at `pc` (QEMU's block pointer `host`).
    fn exec(cpu: u32, host: u32, pc: u64) -> Vec<String> {
        vec![format!(
            "Trace {cpu}: 0x{host:x} [00000000/{pc:016x}/00000000/ff000000] "
        )]
    }

    /// QEMU's listing of a block translated at `pc`: `n` instructions.
    fn listing(name: &str, pc: u64, n: u64) -> Vec<String> {
        let mut v = vec![format!("IN: {name}")];
        v.extend((0..n).map(|i| format!("0x{:08x}:  d503201f  nop", pc + 4 * i)));
        v
    }

    #[test]
    fn attributes_serial_and_step_instructions_to_the_call_they_ran_in() {
        let m = Marks {
            call: 0x4000_0600,
            ..M
        };
        let work = 0x4000_0100;
        let lines = [
            listing("ptera_mark_forward_begin", m.begin, 1),
            exec(0, 0x100, m.begin),
            listing("call", m.call, 1),
            exec(0, 0x600, m.call), // call 1: serial 1
            listing("work", work, 3),
            exec(0, 0x200, work), // serial 4
            listing("ptera_team_fork", m.fork, 1),
            exec(0, 0x300, m.fork),
            exec(0, 0x200, work),
            exec(1, 0x200, work),
            exec(1, 0x200, work),
            listing("ptera_team_join", m.join, 1),
            exec(0, 0x400, m.join), // step: core 0 5, core 1 6
            exec(0, 0x600, m.call), // call 2
            exec(0, 0x200, work),   // serial 4
            listing("ptera_mark_forward_end", m.end, 1),
            exec(0, 0x500, m.end),
        ]
        .concat();
        let mut c = CoreCounter::new(m);
        for l in &lines {
            c.line(l).unwrap();
        }
        let c = c.finish(2).unwrap();
        let call = |serial, in_steps, in_steps_all, steps| CallCount {
            serial,
            in_steps,
            steps,
            in_steps_all,
        };
        assert_eq!(
            c.by_call,
            vec![call(0, 0, 0, 0), call(4, 6, 11, 1), call(4, 0, 0, 0)]
        );
        assert_eq!(c.critical_path, 4 + 6 + 4);
        assert!(c.call_steps.is_empty());
        // Core 1 ran the work block twice inside the step, nothing outside one.
        assert_eq!(c.step_by_pc, HashMap::from([(work, 6)]));
        assert_eq!(
            c.step_by_function(&[(work, 12, "work".to_string())]),
            vec![("work".to_string(), 6)]
        );

        // Following call 1 only: its serial blocks, and its step core by core with the
        // blocks core 0 ran before the fork.
        let mut one = CoreCounter::new(m).only_call(Some(1));
        for l in &lines {
            one.line(l).unwrap();
        }
        let one = one.finish(2).unwrap();
        let mut blocks: Vec<(u64, u64)> = one.serial_by_pc.into_iter().collect();
        blocks.sort();
        assert_eq!(blocks, vec![(work, 3), (m.call, 1)]);
        assert_eq!(
            one.call_steps,
            vec![StepCount {
                before: vec![m.call, work],
                per_core: vec![5, 6],
            }]
        );
        assert_eq!(one.by_call, c.by_call);
        let syms = vec![
            (work, 12, "work".to_string()),
            (m.call, 4, "call".to_string()),
        ];
        assert_eq!(CoreCounts::function_at(&syms, work + 8), "work");
        assert_eq!(CoreCounts::function_at(&syms, work + 12), "?");
    }

    #[test]
    fn refuses_a_trace_without_marks_or_with_unknown_blocks() {
        assert!(feed(&["Trace 0: 0x1 [0/40000000/0/0] x"]).is_err());
        assert!(feed(&["IN: a", "0x40:  nop", "Trace 0: 0x1 [0/40/0/0] a"]).is_err());
    }

    /// qemu-user threads: a position-independent program (marks moved by the load offset seen
    /// at the begin mark's symbol), blocks keyed by address while another thread's execution
    /// comes between a translation and its first execution.
    #[test]
    fn user_threads_relocate_the_marks_and_key_blocks_by_address() {
        let bias = 0x55_0000_0000u64;
        let t = |cpu: u32, host: u32, pc: u64, sym: &str| {
            format!("Trace {cpu}: 0x{host:x} [00000000/{pc:016x}/00000000/ff000000] {sym}")
        };
        let at = |a: u64| a + bias;
        let lines = [
            "IN: ptera_mark_forward_begin".to_string(),
            format!("0x{:x}:  d65f03c0  ret", at(M.begin)),
            t(0, 0x100, at(M.begin), "ptera_mark_forward_begin"),
            "IN: ptera_team_fork".to_string(),
            format!("0x{:x}:  d65f03c0  ret", at(M.fork)),
            "IN: work".to_string(),
            format!("0x{:x}:  d503201f  nop", at(0x4000_0100)),
            format!("0x{:x}:  d65f03c0  ret", at(0x4000_0104)),
            // Thread 1 runs the 2-instruction block before thread 0 runs the fork mark.
            t(1, 0x999, at(0x4000_0100), "work"),
            t(0, 0x300, at(M.fork), "ptera_team_fork"),
            t(0, 0x999, at(0x4000_0100), "work"),
            t(1, 0x999, at(0x4000_0100), "work"),
            "IN: ptera_team_join".to_string(),
            format!("0x{:x}:  d65f03c0  ret", at(M.join)),
            t(0, 0x400, at(M.join), "ptera_team_join"),
            "IN: ptera_mark_forward_end".to_string(),
            format!("0x{:x}:  d65f03c0  ret", at(M.end)),
            t(0, 0x500, at(M.end), "ptera_mark_forward_end"),
        ];
        let mut c = CoreCounter::for_user_threads(M);
        for l in &lines {
            c.line(l).unwrap();
        }
        let c = c.finish(2).unwrap();
        // Thread 0: fork 1 + work 2 + join 1; thread 1: work twice (4).
        assert_eq!(c.per_core, vec![4, 4]);
        assert_eq!(c.critical_path, 4);
        assert_eq!(c.steps, 1);
        // Without the relocation the marks are never found.
        let mut plain = CoreCounter::new(M);
        for l in &lines {
            let _ = plain.line(l);
        }
        assert!(plain.finish(2).is_err());
    }
}
