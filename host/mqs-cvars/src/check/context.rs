//! What the rules share: the library, where the findings go, the rule and
//! step being run, and MPI_T_cvar_get_info of every variable, asked once.

use std::collections::BTreeMap;

use crate::abi::{MpiTError, MPI_SUCCESS};
use crate::library::{Info, MpiT};
use crate::protocol::{Event, Finding};

/// Most places a finding lists.
const EXAMPLES: usize = 3;

/// What the rules share.
pub(super) struct Ctx<'a> {
    pub(super) mpi: &'a MpiT,
    pub(super) emit: &'a mut dyn FnMut(Event),
    pub(super) rule: &'static str,
    pub(super) step: usize,
    pub(super) skip_steps: usize,
    pub(super) findings: BTreeMap<(&'static str, String), (usize, Vec<String>)>,
    pub(super) num: Option<i32>,
    /// MPI_T_cvar_get_info of every index, first asked.
    pub(super) infos: Option<Vec<Result<Info, i32>>>,
    /// Nothing more can be checked (MPI_T would not initialise).
    pub(super) fatal: bool,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(mpi: &'a MpiT, emit: &'a mut dyn FnMut(Event)) -> Self {
        Ctx {
            mpi,
            emit,
            rule: "",
            step: 0,
            skip_steps: 0,
            findings: BTreeMap::new(),
            num: None,
            infos: None,
            fatal: false,
        }
    }

    /// Records a finding of the current rule seen at `place`.
    pub(super) fn note(&mut self, message: impl Into<String>, place: impl Into<String>) {
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
    pub(super) fn step(&mut self, what: &str) -> bool {
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
    pub(super) fn flush(&mut self) {
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

    pub(super) fn code(&self, rc: i32) -> String {
        self.mpi.code_name(rc)
    }

    /// Notes `call` returning `rc` where `expected` was due.
    pub(super) fn expect(
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

    pub(super) fn num(&mut self) -> i32 {
        if let Some(n) = self.num {
            return n;
        }
        let n = self.mpi.num().unwrap_or(0).max(0);
        self.num = Some(n);
        n
    }

    pub(super) fn infos(&mut self) -> &[Result<Info, i32>] {
        if self.infos.is_none() {
            let n = self.num();
            self.infos = Some((0..n).map(|i| self.mpi.info(i)).collect());
        }
        self.infos.as_deref().unwrap_or_default()
    }

    /// The variables whose info could be had: (index, info).
    pub(super) fn known(&mut self) -> Vec<(i32, Info)> {
        self.infos()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i as i32, r.as_ref().ok()?.clone())))
            .collect()
    }
}

pub(super) fn place(index: i32, name: &str) -> String {
    format!("cvar {index} ({name})")
}

pub(super) fn empty_info() -> Info {
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
