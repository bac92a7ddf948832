//! `--check`: a library's MPI_T control-variable interface against the
//! standard's rules (MPI-3.1 chapter 14.3; MPI-4.0 15.3 says the same).
//! Runs in the helper subprocess; each rule announces itself first, and
//! rules whose checks may crash a library announce each step, so that the
//! parent can report the crash as a finding and start a new helper after
//! it.
//!
//! A finding is one kind of deviation, with how often it was seen and the
//! first few places: a library that gets a rule wrong for every variable
//! gives one line, not a thousand.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_void};

use serde::{Deserialize, Serialize};

use crate::abi::{MpiTError, MPI_SUCCESS, MPI_THREAD_MULTIPLE};
use crate::library::{value_buffer, Handle, Info, MpiT, CANARY};
use crate::model::{Bind, Datatype, DatatypeName, Family, Scope, Verbosity};
use crate::protocol::{Event, FailureKind, Finding};

/// One rule of the standard and the checks of it.
#[derive(Debug)]
pub struct Rule {
    pub id: &'static str,
    /// What the standard says, briefly.
    pub rule: &'static str,
    run: fn(&mut Ctx<'_>),
}

/// Every rule, in the order they run: `not-initialized` must come before
/// `init`, and `nesting` (which finalizes) last.
pub static RULES: &[Rule] = &[
    Rule {
        id: "not-initialized",
        rule: "before MPI_T_init_thread, MPI_T routines return MPI_T_ERR_NOT_INITIALIZED",
        run: not_initialized,
    },
    Rule {
        id: "init",
        rule: "MPI_T_init_thread returns MPI_SUCCESS and a thread level in provided",
        run: init,
    },
    Rule {
        id: "num",
        rule: "MPI_T_cvar_get_num returns the number of variables, which never shrinks",
        run: num,
    },
    Rule {
        id: "index-range",
        rule: "indices run 0..num-1; others give MPI_T_ERR_INVALID_INDEX",
        run: index_range,
    },
    Rule {
        id: "names",
        rule: "every variable has a name of at least one character, unique among them",
        run: names,
    },
    Rule {
        id: "null-out",
        rule: "MPI_T_cvar_get_info ignores OUT parameters passed as NULL",
        run: null_out,
    },
    Rule {
        id: "string-return",
        rule: "strings follow the convention for returning strings (NULL buffer, \
               length 0, exact and short buffers, NULL length)",
        run: string_return,
    },
    Rule {
        id: "get-index",
        rule: "MPI_T_cvar_get_index finds every name at its index, and gives \
               MPI_T_ERR_INVALID_NAME for others",
        run: get_index,
    },
    Rule {
        id: "constants",
        rule: "verbosity, scope and binding are MPI_T constants; the datatype is one \
               MPI_T allows",
        run: constants,
    },
    Rule {
        id: "enumerations",
        rule: "enumerations belong to MPI_INT variables and have items 0..num-1 \
               with unique names",
        run: enumerations,
    },
    Rule {
        id: "enum-item-range",
        rule: "MPI_T_enum_get_item outside 0..num-1 gives MPI_T_ERR_INVALID_ITEM",
        run: enum_item_range,
    },
    Rule {
        id: "handles",
        rule: "unbound variables get a handle with a count, read without writing past \
               count elements, and free to MPI_T_CVAR_HANDLE_NULL",
        run: handles,
    },
    Rule {
        id: "read-only-write",
        rule: "writing a variable of scope constant or readonly gives \
               MPI_T_ERR_CVAR_SET_NEVER",
        run: read_only_write,
    },
    Rule {
        id: "null-handle",
        rule: "null handles give MPI_T_ERR_INVALID_HANDLE",
        run: null_handle,
    },
    Rule {
        id: "stable",
        rule: "MPI_T_cvar_get_info answers the same for a variable every time",
        run: stable,
    },
    Rule {
        id: "nesting",
        rule: "MPI_T_init_thread and MPI_T_finalize nest; one finalize too many is an \
               error; initialising again keeps the indices",
        run: nesting,
    },
];

/// The result of `--check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    pub library: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// The rules checked, in order.
    pub rules: Vec<RuleStatement>,
    pub findings: Vec<Finding>,
}

/// A rule as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStatement {
    pub id: String,
    /// What the standard says, briefly.
    pub rule: String,
}

impl CheckReport {
    pub fn conformant(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Most places a finding lists.
const EXAMPLES: usize = 3;
/// A name no library gives a variable.
const NO_SUCH_NAME: &str = "mqs_check_no_such_control_variable";

/// Runs the rules from `first_rule` on, skipping that rule's first
/// `skip_steps` steps (the parent restarts after a crash that way), and
/// sends what it finds.
pub fn run(mpi: &MpiT, first_rule: usize, skip_steps: usize, emit: &mut dyn FnMut(Event)) {
    let init_rule = RULES.iter().position(|r| r.id == "init").unwrap_or(1);
    let mut ctx = Ctx {
        mpi,
        emit,
        rule: "",
        step: 0,
        skip_steps: 0,
        findings: BTreeMap::new(),
        num: None,
        infos: None,
        fatal: false,
    };
    if first_rule > init_rule {
        let (rc, _) = mpi.init();
        if rc != MPI_SUCCESS {
            (ctx.emit)(Event::Failed {
                kind: FailureKind::NoMpiT,
                message: format!("MPI_T_init_thread returned {}", mpi.code_name(rc)),
            });
            return;
        }
    }
    for (i, rule) in RULES.iter().enumerate().skip(first_rule) {
        if ctx.fatal {
            break;
        }
        ctx.rule = rule.id;
        ctx.step = 0;
        ctx.skip_steps = if i == first_rule { skip_steps } else { 0 };
        (ctx.emit)(Event::Step {
            what: rule.id.into(),
            detail: None,
        });
        (rule.run)(&mut ctx);
        ctx.flush();
    }
    (ctx.emit)(Event::Checked { rules: RULES.len() });
}

/// What the rules share.
struct Ctx<'a> {
    mpi: &'a MpiT,
    emit: &'a mut dyn FnMut(Event),
    rule: &'static str,
    step: usize,
    skip_steps: usize,
    findings: BTreeMap<(&'static str, String), (usize, Vec<String>)>,
    num: Option<i32>,
    /// MPI_T_cvar_get_info of every index, first asked.
    infos: Option<Vec<Result<Info, i32>>>,
    /// Nothing more can be checked (MPI_T would not initialise).
    fatal: bool,
}

impl Ctx<'_> {
    /// Records a finding of the current rule seen at `place`.
    fn note(&mut self, message: impl Into<String>, place: impl Into<String>) {
        let entry = self
            .findings
            .entry((self.rule, message.into()))
            .or_insert((0, Vec::new()));
        entry.0 += 1;
        let place = place.into();
        if entry.1.len() < EXAMPLES && !place.is_empty() {
            entry.1.push(place);
        }
    }

    /// Whether to run the next step of a rule, one that may crash the
    /// library (`what` says what it calls); announces it if so, after
    /// sending what the rule found so far.
    fn step(&mut self, what: &str) -> bool {
        self.step += 1;
        if self.step <= self.skip_steps {
            return false;
        }
        self.flush();
        (self.emit)(Event::Step {
            what: format!("{}#{}", self.rule, self.step),
            detail: Some(what.to_owned()),
        });
        true
    }

    /// Sends the findings gathered so far.
    fn flush(&mut self) {
        let findings = std::mem::take(&mut self.findings);
        for ((rule, message), (count, examples)) in findings {
            (self.emit)(Event::Finding {
                finding: Finding {
                    rule: rule.into(),
                    message,
                    count,
                    examples,
                },
            });
        }
    }

    fn code(&self, rc: i32) -> String {
        self.mpi.code_name(rc)
    }

    /// Notes `call` returning `rc` where `expected` was due.
    fn expect(
        &mut self,
        call: &str,
        rc: i32,
        expected: Option<MpiTError>,
        place: impl Into<String>,
    ) {
        let want = expected.map_or(MPI_SUCCESS, |e| self.mpi.abi.code(e));
        if rc == want {
            return;
        }
        let want_name = expected.map_or("MPI_SUCCESS", MpiTError::name);
        let got = if rc == MPI_SUCCESS {
            "MPI_SUCCESS".to_owned()
        } else {
            match self.mpi.abi.error_of(rc) {
                Some(e) => e.name().to_owned(),
                None => format!("{rc}, which is not an MPI_T error code"),
            }
        };
        self.note(format!("{call} returned {got}, not {want_name}"), place);
    }

    fn num(&mut self) -> i32 {
        if let Some(n) = self.num {
            return n;
        }
        let n = self.mpi.num().unwrap_or(0).max(0);
        self.num = Some(n);
        n
    }

    fn infos(&mut self) -> &[Result<Info, i32>] {
        if self.infos.is_none() {
            let n = self.num();
            self.infos = Some((0..n).map(|i| self.mpi.info(i)).collect());
        }
        self.infos.as_deref().unwrap_or_default()
    }

    /// The variables whose info could be had: (index, info).
    fn known(&mut self) -> Vec<(i32, Info)> {
        self.infos()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i as i32, r.as_ref().ok()?.clone())))
            .collect()
    }
}

fn place(index: i32, name: &str) -> String {
    format!("cvar {index} ({name})")
}

fn not_initialized(ctx: &mut Ctx<'_>) {
    let mut n: c_int = 0;
    // SAFETY: MPI_T_cvar_get_num(int *).
    let rc = unsafe { (ctx.mpi.f.cvar_get_num)(&mut n) };
    ctx.expect(
        "MPI_T_cvar_get_num before MPI_T_init_thread",
        rc,
        Some(MpiTError::NotInitialized),
        "",
    );
    let rc = ctx.mpi.finalize();
    ctx.expect(
        "MPI_T_finalize before MPI_T_init_thread",
        rc,
        Some(MpiTError::NotInitialized),
        "",
    );
}

fn init(ctx: &mut Ctx<'_>) {
    let (rc, provided) = ctx.mpi.init();
    if rc != MPI_SUCCESS {
        ctx.expect("MPI_T_init_thread", rc, None, "");
        ctx.fatal = true;
        return;
    }
    if !(0..=MPI_THREAD_MULTIPLE).contains(&provided) {
        ctx.note(
            "MPI_T_init_thread set provided to a value that is no thread level",
            format!("provided {provided}"),
        );
    }
}

fn num(ctx: &mut Ctx<'_>) {
    let mut seen = Vec::new();
    for _ in 0..3 {
        match ctx.mpi.num() {
            Ok(n) if n >= 0 => seen.push(n),
            Ok(n) => {
                ctx.note("MPI_T_cvar_get_num gave a negative number", format!("{n}"));
                return;
            }
            Err(rc) => {
                ctx.expect("MPI_T_cvar_get_num", rc, None, "");
                return;
            }
        }
    }
    if seen.windows(2).any(|w| w[1] < w[0]) {
        let counts: Vec<String> = seen.iter().map(ToString::to_string).collect();
        ctx.note(
            "the number of control variables shrank between calls",
            format!("counts {}", counts.join(", ")),
        );
    }
    ctx.num = seen.first().copied();
}

fn index_range(ctx: &mut Ctx<'_>) {
    let n = ctx.num();
    for index in [-1, n, n + 1000] {
        let mut info = empty_info();
        let (mut name, mut desc) = ([0u8; 64], [0u8; 64]);
        let (mut name_len, mut desc_len) = (64, 64);
        let rc = ctx.mpi.raw_info(
            index,
            Some(&mut name),
            Some(&mut name_len),
            Some(&mut desc),
            Some(&mut desc_len),
            &mut info,
        );
        ctx.expect(
            "MPI_T_cvar_get_info for an index outside 0..num-1",
            rc,
            Some(MpiTError::InvalidIndex),
            format!("index {index}"),
        );
    }
    for index in [-1, n] {
        match ctx.mpi.alloc(index) {
            Ok((handle, _)) => {
                ctx.expect(
                    "MPI_T_cvar_handle_alloc for an index outside 0..num-1",
                    MPI_SUCCESS,
                    Some(MpiTError::InvalidIndex),
                    format!("index {index}"),
                );
                ctx.mpi.free(handle);
            }
            Err(rc) => ctx.expect(
                "MPI_T_cvar_handle_alloc for an index outside 0..num-1",
                rc,
                Some(MpiTError::InvalidIndex),
                format!("index {index}"),
            ),
        }
    }
    let failed: Vec<(i32, i32)> = ctx
        .infos()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|rc| (i as i32, *rc)))
        .collect();
    for (index, rc) in failed {
        let code = ctx.code(rc);
        ctx.note(
            format!("MPI_T_cvar_get_info fails for an index within 0..num-1 ({code})"),
            format!("index {index}"),
        );
    }
}

fn names(ctx: &mut Ctx<'_>) {
    let mut seen: HashMap<String, i32> = HashMap::new();
    for (index, info) in ctx.known() {
        if info.name.is_empty() {
            ctx.note("a variable's name is empty", format!("cvar {index}"));
            continue;
        }
        if let Some(first) = seen.get(&info.name) {
            let first = *first;
            ctx.note(
                "two variables have the same name",
                format!("cvars {first} and {index} ({})", info.name),
            );
        } else {
            seen.insert(info.name.clone(), index);
        }
    }
}

fn empty_info() -> Info {
    Info {
        name: String::new(),
        description: String::new(),
        verbosity: 0,
        datatype: 0,
        enumtype: 0,
        bind: 0,
        scope: 0,
    }
}

/// The OUT parameters of MPI_T_cvar_get_info other than the strings.
const SCALAR_OUTS: [&str; 5] = ["verbosity", "datatype", "enumtype", "bind", "scope"];

fn null_out(ctx: &mut Ctx<'_>) {
    let f = ctx.mpi.f.cvar_get_info;
    use std::ptr::null_mut as null;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        // SAFETY: every OUT parameter NULL, which the standard allows.
        let rc = unsafe {
            f(
                index,
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
                null(),
            )
        };
        ctx.expect(
            "MPI_T_cvar_get_info with every OUT parameter NULL",
            rc,
            None,
            here.clone(),
        );
        for (which, name) in SCALAR_OUTS.iter().enumerate() {
            let mut verbosity: c_int = 0;
            let mut datatype: u64 = 0;
            let mut enumtype: *mut c_void = null();
            let (mut bind, mut scope): (c_int, c_int) = (0, 0);
            let pick = |i: usize, p: *mut c_void| if i == which { null() } else { p };
            // SAFETY: each pointer is NULL or valid storage of its type;
            // the strings are not asked for.
            let rc = unsafe {
                f(
                    index,
                    null(),
                    null(),
                    pick(0, (&raw mut verbosity).cast()).cast(),
                    pick(1, (&raw mut datatype).cast()),
                    pick(2, (&raw mut enumtype).cast()).cast(),
                    null(),
                    null(),
                    pick(3, (&raw mut bind).cast()).cast(),
                    pick(4, (&raw mut scope).cast()).cast(),
                )
            };
            if rc != MPI_SUCCESS {
                ctx.expect(
                    &format!("MPI_T_cvar_get_info with {name} NULL"),
                    rc,
                    None,
                    here.clone(),
                );
                continue;
            }
            let got = [
                i64::from(verbosity),
                ctx.mpi.handle_bits(datatype) as i64,
                enumtype as i64,
                i64::from(bind),
                i64::from(scope),
            ];
            let want = [
                i64::from(info.verbosity),
                info.datatype as i64,
                info.enumtype as i64,
                i64::from(info.bind),
                i64::from(info.scope),
            ];
            for (other, other_name) in SCALAR_OUTS.iter().enumerate() {
                if other != which && got[other] != want[other] {
                    ctx.note(
                        format!(
                            "MPI_T_cvar_get_info with {name} NULL answers a different {other_name}"
                        ),
                        here.clone(),
                    );
                }
            }
        }
    }
}

/// One way to fetch a string: a buffer (None for NULL) and a length
/// pointer (None for NULL); returns the call's code.
type StringCall<'f> = dyn FnMut(Option<&mut [u8]>, Option<&mut c_int>) -> i32 + 'f;

/// The convention for returning strings, checked on one string whose full
/// text is `full`.
fn string_convention(
    ctx: &mut Ctx<'_>,
    what: &str,
    here: &str,
    full: &str,
    call: &mut StringCall<'_>,
) {
    let full = full.as_bytes();
    let want_len = full.len() as c_int + 1;
    let note = |ctx: &mut Ctx<'_>, message: String, detail: String| {
        let at = if detail.is_empty() {
            here.to_owned()
        } else {
            format!("{here}: {detail}")
        };
        ctx.note(format!("{what}: {message}"), at);
    };
    // A NULL buffer with a length: only the length comes back.
    let mut len: c_int = 7;
    let rc = call(None, Some(&mut len));
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a NULL buffer"), rc, None, here);
    } else if len != want_len {
        let message = if full.is_empty() && len == 0 {
            "an empty string (no description) comes back with length 0; the standard \
             wants 1 (the NUL)"
                .to_owned()
        } else {
            "a NULL buffer does not give the string's length plus one".to_owned()
        };
        note(ctx, message, format!("length {len}, want {want_len}"));
    }
    // A length of 0: the buffer is left alone, the length comes back.
    let mut buf = [b'X'; 16];
    let mut len: c_int = 0;
    let rc = call(Some(&mut buf), Some(&mut len));
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a length of 0"), rc, None, here);
    } else {
        if len != want_len {
            note(
                ctx,
                "a length of 0 does not give the string's length plus one".into(),
                format!("length {len}, want {want_len}"),
            );
        }
        if buf != [b'X'; 16] {
            note(
                ctx,
                "a length of 0 still writes into the buffer".into(),
                String::new(),
            );
        }
    }
    // Buffers of the exact size, one byte short, and one byte.
    let sizes: Vec<(usize, &str)> = if full.is_empty() {
        vec![(1, "exact")]
    } else {
        vec![
            (full.len() + 1, "exact"),
            (full.len(), "short"),
            (1, "one-byte"),
        ]
    };
    for (size, kind) in sizes {
        let mut buf = vec![b'X'; size + 16];
        buf[size..].fill(CANARY);
        let mut len = size as c_int;
        let rc = call(Some(&mut buf[..]), Some(&mut len));
        if rc != MPI_SUCCESS {
            ctx.expect(
                &format!("{what} with a buffer of the {kind} size"),
                rc,
                None,
                here,
            );
            continue;
        }
        let kept = size - 1;
        let want_text = &full[..kept.min(full.len())];
        if &buf[..kept] != want_text || buf[kept] != 0 {
            let text = String::from_utf8_lossy(&buf[..size]).into_owned();
            let message = if kind == "exact" {
                "a buffer of exactly the string's length plus one does not get the whole \
                 string and its NUL"
            } else {
                "a short buffer does not get the string cut to length-1 characters and a NUL"
            };
            note(ctx, message.into(), format!("buffer {size}: {text:?}"));
        }
        if buf[size..].iter().any(|&b| b != CANARY) {
            note(
                ctx,
                "the library writes past the length it was given".into(),
                format!("buffer {size}"),
            );
        }
        if len != want_len {
            let message = if kind == "exact" {
                "a buffer of the exact size does not give the string's length plus one"
            } else if len == size as c_int {
                "a cut string gives the buffer's length, not the full string's length plus one"
            } else {
                "a cut string does not give the full string's length plus one"
            };
            note(
                ctx,
                message.into(),
                format!("length {len}, want {want_len}"),
            );
        }
    }
    // A NULL length: nothing is returned.
    let mut buf = vec![b'X'; full.len() + 1];
    let rc = call(Some(&mut buf), None);
    if rc != MPI_SUCCESS {
        ctx.expect(&format!("{what} with a NULL length"), rc, None, here);
    } else if buf.iter().any(|&b| b != b'X') {
        note(
            ctx,
            "a NULL length still writes into the buffer".into(),
            String::new(),
        );
    }
}

fn string_return(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        let mut desc = vec![0u8; info.description.len() + 64];
        let mut name_call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut desc_len = desc.len() as c_int;
            let mut out = empty_info();
            mpi.raw_info(
                index,
                buf,
                len,
                Some(&mut desc),
                Some(&mut desc_len),
                &mut out,
            )
        };
        string_convention(ctx, "cvar name", &here, &info.name, &mut name_call);
        let mut name = vec![0u8; info.name.len() + 64];
        let mut desc_call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut name_len = name.len() as c_int;
            let mut out = empty_info();
            mpi.raw_info(
                index,
                Some(&mut name),
                Some(&mut name_len),
                buf,
                len,
                &mut out,
            )
        };
        string_convention(
            ctx,
            "cvar description",
            &here,
            &info.description,
            &mut desc_call,
        );
    }
    // Enumeration names and item names, each enumeration once.
    for (enumtype, here) in distinct_enums(ctx) {
        let Ok((num, name)) = mpi.enum_info(enumtype) else {
            continue;
        };
        let mut call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
            let mut n: c_int = 0;
            // SAFETY: MPI_T_enum_get_info with a handle from get_info and
            // a buffer of the length given (or NULLs).
            unsafe {
                (mpi.f.enum_get_info)(
                    enumtype as *mut c_void,
                    &mut n,
                    buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast()),
                    len.map_or(std::ptr::null_mut(), |l| l as *mut c_int),
                )
            }
        };
        let enum_place = format!("{here}, enumeration {name}");
        string_convention(ctx, "enumeration name", &enum_place, &name, &mut call);
        for item in 0..num.clamp(0, 64) {
            let Ok((_, item_name)) = mpi.enum_item(enumtype, item) else {
                continue;
            };
            let mut call = |buf: Option<&mut [u8]>, len: Option<&mut c_int>| {
                let mut value: c_int = 0;
                // SAFETY: MPI_T_enum_get_item with an index below num.
                unsafe {
                    (mpi.f.enum_get_item)(
                        enumtype as *mut c_void,
                        item,
                        &mut value,
                        buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr().cast()),
                        len.map_or(std::ptr::null_mut(), |l| l as *mut c_int),
                    )
                }
            };
            let item_place = format!("{enum_place} item {item}");
            string_convention(
                ctx,
                "enumeration item name",
                &item_place,
                &item_name,
                &mut call,
            );
        }
    }
}

/// Each enumeration handle once, with the first variable that has it.
fn distinct_enums(ctx: &mut Ctx<'_>) -> Vec<(usize, String)> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (index, info) in ctx.known() {
        if info.enumtype != 0 && !seen.contains(&info.enumtype) {
            seen.push(info.enumtype);
            out.push((info.enumtype, place(index, &info.name)));
        }
    }
    out
}

fn get_index(ctx: &mut Ctx<'_>) {
    let known = ctx.known();
    let mut indices: HashMap<&str, Vec<i32>> = HashMap::new();
    for (index, info) in &known {
        indices.entry(info.name.as_str()).or_default().push(*index);
    }
    for (index, info) in &known {
        if info.name.is_empty() {
            continue;
        }
        let here = place(*index, &info.name);
        match ctx.mpi.get_index(&info.name) {
            Ok(found) if indices[info.name.as_str()].contains(&found) => {}
            Ok(found) => ctx.note(
                "MPI_T_cvar_get_index gives another index than the variable's",
                format!("{here}: got {found}"),
            ),
            Err(rc) => ctx.expect("MPI_T_cvar_get_index of a variable's name", rc, None, here),
        }
    }
    let rc = ctx.mpi.get_index(NO_SUCH_NAME).err().unwrap_or(MPI_SUCCESS);
    ctx.expect(
        "MPI_T_cvar_get_index of a name no variable has",
        rc,
        Some(MpiTError::InvalidName),
        NO_SUCH_NAME,
    );
}

fn constants(ctx: &mut Ctx<'_>) {
    let abi = ctx.mpi.abi;
    for (index, info) in ctx.known() {
        let here = place(index, &info.name);
        if let Verbosity::Unknown(raw) = abi.verbosity(info.verbosity) {
            ctx.note(
                "a verbosity that is none of MPI_T_VERBOSITY_*",
                format!("{here}: {raw}"),
            );
        }
        if let Scope::Unknown(raw) = abi.scope(info.scope) {
            ctx.note(
                "a scope that is none of MPI_T_SCOPE_*",
                format!("{here}: {raw}"),
            );
        }
        if let Bind::Unknown(raw) = abi.bind(info.bind) {
            ctx.note(
                "a binding that is none of MPI_T_BIND_*",
                format!("{here}: {raw}"),
            );
        }
        match ctx.mpi.datatype(info.datatype) {
            DatatypeName::Known(d) if d.is_standard() => {}
            DatatypeName::Known(d) => ctx.note(
                format!(
                    "datatype {d}, which MPI_T does not allow (only MPI_INT, MPI_UNSIGNED, \
                     MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_COUNT, MPI_CHAR, MPI_DOUBLE)"
                ),
                here,
            ),
            DatatypeName::Unknown(bits) => ctx.note(
                "a datatype handle that is no MPI datatype",
                format!("{here}: {bits:#x}"),
            ),
        }
    }
}

fn enumerations(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    let int = mpi.datatype_bits(Datatype::Int);
    let mut checked: Vec<usize> = Vec::new();
    for (index, info) in ctx.known() {
        if info.enumtype == 0 {
            continue;
        }
        let here = place(index, &info.name);
        if Some(info.datatype) != int {
            let d = mpi.datatype(info.datatype);
            ctx.note(
                format!("an enumeration on a variable of datatype {d}, not MPI_INT"),
                here.clone(),
            );
        }
        if checked.contains(&info.enumtype) {
            continue;
        }
        checked.push(info.enumtype);
        let (num, name) = match mpi.enum_info(info.enumtype) {
            Ok(pair) => pair,
            Err(rc) => {
                ctx.expect("MPI_T_enum_get_info", rc, None, here);
                continue;
            }
        };
        if num < 1 {
            ctx.note(
                "an enumeration without items",
                format!("{here}: {name} has {num}"),
            );
            continue;
        }
        let mut names: Vec<String> = Vec::new();
        for item in 0..num.min(4096) {
            match mpi.enum_item(info.enumtype, item) {
                Ok((_, item_name)) if item_name.is_empty() => ctx.note(
                    "an enumeration item with an empty name",
                    format!("{here}: {name} item {item}"),
                ),
                Ok((_, item_name)) if names.contains(&item_name) => ctx.note(
                    "two items of an enumeration have the same name",
                    format!("{here}: {name} item {item} ({item_name})"),
                ),
                Ok((_, item_name)) => names.push(item_name),
                Err(rc) => ctx.expect(
                    "MPI_T_enum_get_item for an item within 0..num-1",
                    rc,
                    None,
                    format!("{here}: {name} item {item}"),
                ),
            }
        }
    }
}

fn enum_item_range(ctx: &mut Ctx<'_>) {
    let enums = distinct_enums(ctx);
    if enums.is_empty() {
        return;
    }
    let mpi = ctx.mpi;
    for (label, past_end) in [("num", true), ("-1", false)] {
        if !ctx.step(&format!("MPI_T_enum_get_item for item {label}")) {
            continue;
        }
        for (enumtype, here) in &enums {
            let Ok((num, name)) = mpi.enum_info(*enumtype) else {
                continue;
            };
            let item = if past_end { num } else { -1 };
            let rc = mpi.enum_item(*enumtype, item).err().unwrap_or(MPI_SUCCESS);
            ctx.expect(
                &format!("MPI_T_enum_get_item for item {label}"),
                rc,
                Some(MpiTError::InvalidItem),
                format!("{here}: {name}"),
            );
        }
    }
}

/// The unbound variables with a known datatype: (index, info, datatype).
fn unbound(ctx: &mut Ctx<'_>) -> Vec<(i32, Info, Datatype)> {
    let mpi = ctx.mpi;
    ctx.known()
        .into_iter()
        .filter(|(_, info)| mpi.abi.bind(info.bind) == Bind::NoObject)
        .filter_map(|(i, info)| {
            let d = mpi.datatype(info.datatype).known()?;
            Some((i, info, d))
        })
        .collect()
}

/// Reads a variable into a canaried buffer: (code, bytes of count
/// elements, whether the canary survived).
fn read_raw(mpi: &MpiT, handle: Handle, datatype: Datatype, count: i32) -> (i32, Vec<u8>, bool) {
    let mut buf = value_buffer(datatype, count);
    let len = datatype.size() * count.max(0) as usize;
    let rc = mpi.read_into(handle, &mut buf);
    let intact = buf[len..].iter().all(|&b| b == CANARY);
    buf.truncate(len);
    (rc, buf, intact)
}

fn handles(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info, datatype) in unbound(ctx) {
        let here = place(index, &info.name);
        let (handle, count) = match mpi.alloc(index) {
            Ok(pair) => pair,
            Err(rc) => {
                ctx.expect(
                    "MPI_T_cvar_handle_alloc of an unbound variable",
                    rc,
                    None,
                    here,
                );
                continue;
            }
        };
        if handle.0.is_null() {
            ctx.note(
                "MPI_T_cvar_handle_alloc succeeds with MPI_T_CVAR_HANDLE_NULL",
                here.clone(),
            );
            continue;
        }
        if !(0..=1 << 20).contains(&count) {
            ctx.note(
                "MPI_T_cvar_handle_alloc gives an unbelievable count",
                format!("{here}: {count}"),
            );
            mpi.free(handle);
            continue;
        }
        let (rc, bytes, intact) = read_raw(mpi, handle, datatype, count);
        if rc != MPI_SUCCESS {
            ctx.expect("MPI_T_cvar_read", rc, None, format!("{here}, {datatype}"));
        } else {
            if !intact {
                ctx.note(
                    "MPI_T_cvar_read writes past count elements",
                    format!("{here}: count {count} of {datatype}"),
                );
            }
            if datatype == Datatype::Char && !bytes.contains(&0) {
                ctx.note(
                    "an MPI_CHAR value without a NUL within count characters",
                    format!("{here}: count {count}"),
                );
            }
            if mpi.abi.scope(info.scope) == Scope::Constant {
                let (rc, again, _) = read_raw(mpi, handle, datatype, count);
                if rc == MPI_SUCCESS && again != bytes {
                    ctx.note("a constant variable reads differently twice", here.clone());
                }
            }
        }
        let (rc, after) = mpi.free(handle);
        if rc != MPI_SUCCESS {
            ctx.expect("MPI_T_cvar_handle_free", rc, None, here);
        } else if after != 0 {
            ctx.note(
                "MPI_T_cvar_handle_free does not set the handle to MPI_T_CVAR_HANDLE_NULL",
                here,
            );
        }
    }
}

fn read_only_write(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    for (index, info, datatype) in unbound(ctx) {
        let scope = mpi.abi.scope(info.scope);
        if !scope.read_only() {
            continue;
        }
        let here = format!("{}, scope {}", place(index, &info.name), scope.as_str());
        let Ok((handle, count)) = mpi.alloc(index) else {
            continue;
        };
        if handle.0.is_null() || !(0..=1 << 20).contains(&count) {
            continue;
        }
        let (rc, mut bytes, _) = read_raw(mpi, handle, datatype, count);
        if rc == MPI_SUCCESS {
            // Its own value back: nothing changes should the write succeed.
            // Zeros beyond it, for libraries that read a fixed 8 bytes.
            bytes.resize(bytes.len() + crate::library::SLACK, 0);
            let rc = mpi.write_from(handle, &bytes);
            ctx.expect(
                "MPI_T_cvar_write to a read-only variable",
                rc,
                Some(MpiTError::CvarSetNever),
                here,
            );
        }
        mpi.free(handle);
    }
}

fn null_handle(ctx: &mut Ctx<'_>) {
    let mpi = ctx.mpi;
    let null = std::ptr::null_mut();
    if ctx.step("MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL") {
        let mut buf = [0u8; 64];
        // SAFETY: MPI_T_CVAR_HANDLE_NULL is NULL in both families; the
        // call is meant to refuse it.
        let rc = unsafe { (mpi.f.cvar_read)(null, buf.as_mut_ptr().cast()) };
        ctx.expect(
            "MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
    if ctx.step("MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL") {
        let buf = [0u8; 64];
        // SAFETY: as above, for MPI_T_cvar_write.
        let rc = unsafe { (mpi.f.cvar_write)(null, buf.as_ptr().cast()) };
        ctx.expect(
            "MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
    if ctx.step("MPI_T_enum_get_info of MPI_T_ENUM_NULL") {
        let mut num: c_int = 0;
        let mut len: c_int = 0;
        // SAFETY: MPI_T_ENUM_NULL is NULL in both families.
        let rc = unsafe { (mpi.f.enum_get_info)(null, &mut num, null.cast(), &mut len) };
        ctx.expect(
            "MPI_T_enum_get_info of MPI_T_ENUM_NULL",
            rc,
            Some(MpiTError::InvalidHandle),
            "",
        );
    }
}

fn stable(ctx: &mut Ctx<'_>) {
    let first: Vec<Result<Info, i32>> = ctx.infos().to_vec();
    for (index, before) in first.iter().enumerate() {
        let Ok(before) = before else { continue };
        let here = place(index as i32, &before.name);
        match ctx.mpi.info(index as i32) {
            Ok(now) => {
                let fields = [
                    ("name", before.name != now.name),
                    ("description", before.description != now.description),
                    ("verbosity", before.verbosity != now.verbosity),
                    ("datatype", before.datatype != now.datatype),
                    ("enumeration", before.enumtype != now.enumtype),
                    ("binding", before.bind != now.bind),
                    ("scope", before.scope != now.scope),
                ];
                for (field, changed) in fields {
                    if changed {
                        ctx.note(
                            format!("MPI_T_cvar_get_info answers a different {field} later"),
                            here.clone(),
                        );
                    }
                }
            }
            Err(rc) => {
                let code = ctx.code(rc);
                ctx.note(
                    format!("MPI_T_cvar_get_info fails later for a variable it described ({code})"),
                    here,
                );
            }
        }
    }
}

fn nesting(ctx: &mut Ctx<'_>) {
    // Each call is a step, so that a crash names it; the state a later
    // step needs is gone with a crashed helper, so nothing is resumed.
    if ctx.skip_steps > 0 {
        return;
    }
    let mpi = ctx.mpi;
    let before: Vec<String> = ctx
        .known()
        .into_iter()
        .take(64)
        .map(|(_, info)| info.name)
        .collect();
    let num = |mpi: &MpiT| mpi.num().err().unwrap_or(MPI_SUCCESS);
    // Initialised once by `init`; once more now.
    if ctx.step("a second MPI_T_init_thread") {
        let (rc, _) = mpi.init();
        ctx.expect("a second MPI_T_init_thread", rc, None, "");
    }
    if ctx.step("the first of two MPI_T_finalize") {
        let rc = mpi.finalize();
        ctx.expect("the first of two MPI_T_finalize", rc, None, "");
    }
    let between = "MPI_T_cvar_get_num after one MPI_T_finalize of two initialisations";
    if ctx.step(between) {
        ctx.expect(between, num(mpi), None, "");
    }
    if ctx.step("the second of two MPI_T_finalize") {
        let rc = mpi.finalize();
        ctx.expect("the second of two MPI_T_finalize", rc, None, "");
    }
    let after = "MPI_T_cvar_get_num after the last MPI_T_finalize";
    if ctx.step(after) {
        ctx.expect(after, num(mpi), Some(MpiTError::NotInitialized), "");
    }
    let extra = "one MPI_T_finalize more than MPI_T_init_thread";
    if ctx.step(extra) {
        let rc = mpi.finalize();
        ctx.expect(extra, rc, Some(MpiTError::NotInitialized), "");
    }
    let again = "MPI_T_init_thread after the last MPI_T_finalize";
    if ctx.step(again) {
        let (rc, _) = mpi.init();
        ctx.expect(again, rc, None, "");
        if rc != MPI_SUCCESS {
            return;
        }
    }
    let count = "MPI_T_cvar_get_num after initialising again";
    if ctx.step(count) {
        ctx.expect(count, num(mpi), None, "");
    }
    if !ctx.step("MPI_T_cvar_get_info after initialising again") {
        return;
    }
    for (index, name) in before.iter().enumerate() {
        match mpi.info(index as i32) {
            Ok(info) if &info.name == name => {}
            Ok(info) => ctx.note(
                "initialised again, a variable has another index",
                format!("cvar {index}: {name} before, {} now", info.name),
            ),
            Err(rc) => {
                let code = ctx.code(rc);
                ctx.note(
                    format!("initialised again, an index no longer answers ({code})"),
                    place(index as i32, name),
                );
            }
        }
    }
}
