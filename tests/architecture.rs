//! The dependency direction of `src/`, checked on every test run.
//!
//! Reads every non-generated, non-test source file of the library, resolves each
//! `crate::`/`super::`/`self::`/child-module path it names (in `use` trees and inline) to the
//! deepest module that exists, and fails on
//! 1. an import from a lower layer to a higher one ([`LAYERS`], top first), or between two
//!    different top-level modules of the same layer;
//! 2. an import cycle between modules (files): a module reaching itself again through its
//!    imports. A folder's `mod.rs` that re-exports a child counts as importing it, so siblings
//!    import each other directly, never through their parent's re-exports;
//! 3. a hand-written file in `src/` longer than [`MAX_LINES`].
//!
//! Test code (files named `tests.rs` or `*_tests.rs`, items under `#[cfg(test)]`, and the files
//! of modules declared under `#[cfg(test)]`) is exempt from rules 1 and 2: a kernel test may
//! build a whole program with `crate::testing`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, highest layer first. A module may import modules of lower
/// layers only. `error` sits below `format` because the container reader reports
/// [`ptera::Error`]; the error types carry a `DType` and a `Shape`, hence those two below it.
const LAYERS: &[&[&str]] = &[
    // one-operator programs for tests (std): drives the whole public API
    &["testing"],
    // ETDump profiles and BundledProgram self-tests, over the public API
    &["devtools"],
    // public API: `MethodMeta` (validation and sizing) and `Method` (load, run, outputs)
    &["method"],
    // operator/backend registry, metadata layout, value table, instruction loop, row demand
    &["exec"],
    // delegate backends and the portable ATen kernel library
    &["delegate", "kernels"],
    // what kernels and delegates are written against; linear algebra; buffer placement
    &["kernel_api", "linalg", "planner"],
    // typed tensor views and element access
    &["tensor"],
    // the `.pte` container and program flatbuffer
    &["format"],
    &["error"],
    // work sharing across cores (teams of cores or threads) imports nothing
    &["dtype", "shape", "host", "parallel"],
];

/// Longest hand-written file allowed in `src/`.
const MAX_LINES: usize = 1200;

/// Files still being split by operator family (each entry goes away with its split).
const SPLIT_PENDING: &[&str] = &[];

#[derive(Default)]
struct Module {
    file: PathBuf,
    /// Paths named by non-test code, already made absolute (segments from the crate root).
    paths: Vec<Vec<String>>,
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut segs: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = segs.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        segs.push(stem.to_string());
    }
    segs
}

fn is_test_file(file: &Path) -> bool {
    let stem = file.file_stem().unwrap().to_string_lossy();
    stem == "tests" || stem.ends_with("_tests")
}

/// Removes comments, string and char literals (keeping a placeholder), so that braces and
/// paths inside them are not seen.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // raw string r"..." / r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // char literal ('x', '\n', '\u{..}') or a lifetime ('a)
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

fn tokenize(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push(Tok::Ident(s[st..i].to_string()));
            continue;
        }
        match c {
            b':' if b.get(i + 1) == Some(&b':') => {
                v.push(Tok::Colons);
                i += 2;
                continue;
            }
            b'{' => v.push(Tok::Open),
            b'}' => v.push(Tok::Close),
            b',' => v.push(Tok::Comma),
            b';' => v.push(Tok::Semi),
            b'*' => v.push(Tok::Star),
            c if c.is_ascii_whitespace() => {}
            c => v.push(Tok::Other(c as char)),
        }
        i += 1;
    }
    v
}

/// Drops `#[cfg(test)]` items (the attribute, then up to a `;` or a balanced `{ .. }`).
fn drop_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let is = |t: &[Tok], pat: &[Tok]| t.len() >= pat.len() && t[..pat.len()] == *pat;
    let cfg_test = [
        Tok::Other('#'),
        Tok::Other('['),
        Tok::Ident("cfg".into()),
        Tok::Other('('),
        Tok::Ident("test".into()),
        Tok::Other(')'),
        Tok::Other(']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if is(&toks[i..], &cfg_test) {
            i += cfg_test.len();
            while i < toks.len() && toks[i] != Tok::Semi && toks[i] != Tok::Open {
                i += 1;
            }
            if i < toks.len() && toks[i] == Tok::Open {
                let mut depth = 0;
                while i < toks.len() {
                    match toks[i] {
                        Tok::Open => depth += 1,
                        Tok::Close => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// Parses a use tree starting at `toks[i]` with `prefix`; pushes every full path.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        match toks.get(i) {
            Some(Tok::Ident(id)) => {
                path.push(id.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::Colons) {
                    i += 1;
                    continue;
                }
                if toks.get(i) == Some(&Tok::Ident("as".into())) {
                    i += 2; // `as alias`
                }
                out.push(path);
                return i;
            }
            Some(Tok::Star) => {
                out.push(path);
                return i + 1;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, path.clone(), out),
                    }
                }
            }
            _ => {
                out.push(path);
                return i;
            }
        }
    }
}

/// Makes a path absolute from module `here`; `None` for paths outside the crate.
fn absolute(here: &[String], path: &[String], children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut base: Vec<String> = here.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("super") | Some("self") => {
            while let Some(s) = rest.first().map(String::as_str) {
                match s {
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn scan(here: &[String], toks: &[Tok], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut raw = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Ident(id) if id == "use" => {
                i = use_tree(toks, i + 1, Vec::new(), &mut raw);
            }
            // a path, not the tail of one, nor a visibility (`pub(in crate::a)`)
            Tok::Ident(id)
                if toks.get(i + 1) == Some(&Tok::Colons)
                    && (i == 0
                        || (toks[i - 1] != Tok::Colons
                            && toks[i - 1] != Tok::Ident("in".into()))) =>
            {
                let mut p = vec![id.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Colons) {
                    match toks.get(j + 1) {
                        Some(Tok::Ident(n)) => p.push(n.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                raw.push(p);
                i = j;
            }
            _ => i += 1,
        }
    }
    raw.iter()
        .filter_map(|p| absolute(here, p, children))
        .collect()
}

/// Files of modules declared `#[cfg(test)] mod name;` in `file` (other attributes may sit
/// between; a `#[path]` module must be named `*_tests.rs`, which is test code by name).
fn test_module_files(file: &Path, toks: &[Tok]) -> Vec<PathBuf> {
    let cfg_test = [
        Tok::Other('#'),
        Tok::Other('['),
        Tok::Ident("cfg".into()),
        Tok::Other('('),
        Tok::Ident("test".into()),
        Tok::Other(')'),
        Tok::Other(']'),
    ];
    let dir = match file.file_stem().unwrap().to_str().unwrap() {
        "mod" | "lib" => file.parent().unwrap().to_path_buf(),
        stem => file.parent().unwrap().join(stem),
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i + cfg_test.len() <= toks.len() {
        if toks[i..i + cfg_test.len()] != cfg_test {
            i += 1;
            continue;
        }
        let mut j = i + cfg_test.len();
        // Skip further attributes `#[...]`.
        while toks.get(j) == Some(&Tok::Other('#')) {
            while j < toks.len() && toks[j] != Tok::Other(']') {
                j += 1;
            }
            j += 1;
        }
        if let (Some(Tok::Ident(m)), Some(Tok::Ident(name)), Some(Tok::Semi)) =
            (toks.get(j), toks.get(j + 1), toks.get(j + 2))
        {
            if m == "mod" {
                out.push(dir.join(format!("{name}.rs")));
                out.push(dir.join(name).join("mod.rs"));
            }
        }
        i = j;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().unwrap() != "generated" {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn load() -> (BTreeMap<Vec<String>, Module>, Vec<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut test_files = BTreeSet::new();
    for f in &files {
        let toks = tokenize(&strip(&fs::read_to_string(f).unwrap()));
        test_files.extend(test_module_files(f, &toks));
    }
    let mut modules = BTreeMap::new();
    let mut too_long = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        let lines = text.lines().count();
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if lines > MAX_LINES && !SPLIT_PENDING.contains(&rel.as_str()) {
            too_long.push(format!(
                "{} has {lines} lines (limit {MAX_LINES})",
                f.strip_prefix(&src).unwrap().display()
            ));
        }
        if is_test_file(f) || test_files.contains(f) {
            continue;
        }
        let toks = drop_test_items(tokenize(&strip(&text)));
        let mut children = BTreeSet::new();
        for w in toks.windows(2) {
            if let (Tok::Ident(m), Tok::Ident(name)) = (&w[0], &w[1]) {
                if m == "mod" {
                    children.insert(name.clone());
                }
            }
        }
        let here = module_path(&src, f);
        let paths = scan(&here, &toks, &children);
        modules.insert(
            here,
            Module {
                file: f.strip_prefix(&src).unwrap().to_path_buf(),
                paths,
            },
        );
    }
    (modules, too_long)
}

/// The module a path names: its longest prefix that is a module (file) of the crate.
fn resolve(modules: &BTreeMap<Vec<String>, Module>, path: &[String]) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains_key(p))
        .unwrap_or_default()
}

fn edges(modules: &BTreeMap<Vec<String>, Module>) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut g: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, info) in modules {
        let set = g.entry(m.clone()).or_default();
        for p in &info.paths {
            let to = resolve(modules, p);
            if &to != m {
                set.insert(to);
            }
        }
    }
    g
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn layer(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

#[test]
fn imports_run_one_way() {
    let (modules, _) = load();
    let g = edges(&modules);
    let mut bad = Vec::new();
    for (from, tos) in &g {
        let Some(top_from) = from.first() else {
            continue; // lib.rs: the public API re-exports from every layer
        };
        let Some(lf) = layer(top_from) else {
            bad.push(format!("top-level module `{top_from}` is not in LAYERS"));
            continue;
        };
        for to in tos {
            let Some(top_to) = to.first() else {
                bad.push(format!("{} imports the crate root", name(from)));
                continue;
            };
            if top_to == top_from {
                continue;
            }
            match layer(top_to) {
                Some(lt) if lt > lf => {}
                Some(_) => bad.push(format!(
                    "{} ({}) imports {}: `{top_to}` is not in a lower layer than `{top_from}`",
                    name(from),
                    modules[from].file.display(),
                    name(to)
                )),
                None => bad.push(format!("top-level module `{top_to}` is not in LAYERS")),
            }
        }
    }
    assert!(bad.is_empty(), "layer violations:\n{}", bad.join("\n"));
}

#[test]
fn no_import_cycles() {
    let (modules, _) = load();
    let g = edges(&modules);
    // Tarjan's strongly connected components.
    struct St<'g> {
        g: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on: BTreeSet<&'g Vec<String>>,
        sccs: Vec<Vec<&'g Vec<String>>>,
    }
    fn visit<'g>(s: &mut St<'g>, v: &'g Vec<String>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(tos) = s.g.get(v) {
            for w in tos {
                let Some((w, _)) = s.g.get_key_value(w) else {
                    continue;
                };
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.sccs.push(comp);
            }
        }
    }
    let mut s = St {
        g: &g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        sccs: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    // PTERA_ARCH_EDGES=1 lists the edges inside each cycle (to find the one to cut).
    if std::env::var_os("PTERA_ARCH_EDGES").is_some() {
        for c in &s.sccs {
            for from in c {
                for to in &g[*from] {
                    if c.contains(&to) {
                        eprintln!("{} -> {}", name(from), name(to));
                    }
                }
            }
        }
    }
    let report: Vec<String> = s
        .sccs
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|m| name(m)).collect();
            names.sort();
            format!("cycle among: {}", names.join(", "))
        })
        .collect();
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn no_oversized_files() {
    let (_, too_long) = load();
    assert!(too_long.is_empty(), "{}", too_long.join("\n"));
}

/// The checker itself: paths in use trees, inline paths, `super`, child re-exports, strings and
/// `#[cfg(test)]` items.
#[test]
fn checker_sees_paths() {
    let children: BTreeSet<String> = ["driver".to_string()].into();
    let here = vec!["linalg".to_string(), "gemm".to_string()];
    let src = r#"
        use crate::{error::KernelError, tensor::{Shape, MAX_RANK as R}};
        pub use driver::sgemm;
        use super::vecmath::*;
        pub(in crate::linalg::gemm) struct S;
        fn f() { let s = "crate::exec::x"; crate::dtype::DType::F32; core::ptr::null::<u8>(); }
        #[cfg(test)]
        mod tests { use crate::testing::OpTest; }
    "#;
    let toks = drop_test_items(tokenize(&strip(src)));
    let got: BTreeSet<String> = scan(&here, &toks, &children)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "error::KernelError",
        "tensor::Shape",
        "tensor::MAX_RANK",
        "linalg::gemm::driver::sgemm",
        "linalg::vecmath",
        "dtype::DType::F32",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}

/// Modules declared under `#[cfg(test)]` (with or without further attributes) are test files.
#[test]
fn checker_finds_test_modules() {
    let src = "#[cfg(test)]\nmod test_util;\n#[cfg(test)]\n#[allow(dead_code)]\nmod helpers;\nmod real;\n";
    let got = test_module_files(
        Path::new("src/kernels/portable/mod.rs"),
        &tokenize(&strip(src)),
    );
    let want: Vec<PathBuf> = [
        "src/kernels/portable/test_util.rs",
        "src/kernels/portable/test_util/mod.rs",
        "src/kernels/portable/helpers.rs",
        "src/kernels/portable/helpers/mod.rs",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(got, want);
}
