//! Synthetic jobs: a few recorded processes (*templates*: the dumps a
//! saved snapshot replays to) and how to multiply them: `ranks` ranks,
//! `per_host` on each synthetic host (one collector each), in `states`
//! distinct states. Rank `r` is in state `r * states / ranks`, so each
//! state is one contiguous range of ranks ([`SyntheticJob::state_ranks`]).
//! State `s` is template `s % templates`, its tags moved by [`TAG_STEP`]
//! times `s / templates` so that states made from one template still
//! differ. Each rank is renumbered: its pid, its global rank, and its rank
//! in every communicator the size of the recorded MPI_COMM_WORLD (whose
//! size becomes `ranks`; groups are left out, a list of every rank in
//! every rank's dump being the one thing that would not scale). Peers in
//! the queues stay the recorded ones.

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::pattern::Pattern;
use crate::{Error, Result};
use mqs_abi::OpClass;
use mqs_acquire::members::Member;
use mqs_core::model::{ProcessDump, Section};

/// The pid of each host's first synthetic rank; the others follow.
pub const FIRST_PID: i32 = 1000;
/// The tags of a state's operations are its template's plus this many
/// times the state's variant (`state / templates`); recorded tags at or
/// above it stay as they are.
pub const TAG_STEP: i64 = 1000;

/// A job to serve from templates; see the module's documentation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyntheticJob {
    pub ranks: usize,
    pub states: usize,
    pub per_host: usize,
    pub templates: Vec<ProcessDump>,
    /// The host whose collector, told to go, stops answering instead (it
    /// writes its pid to [`SyntheticJob::held_marker`] and sleeps): for
    /// tests that kill a collector in the middle of a dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// The queues' shape: the templates' states, or a real application's
    /// pattern with every rank's own addresses ([`Pattern`]).
    #[serde(default)]
    pub pattern: Pattern,
}

impl SyntheticJob {
    /// Checks the numbers: at least one template, rank and rank per host,
    /// and between 1 and `ranks` states.
    pub fn new(
        templates: Vec<ProcessDump>,
        ranks: usize,
        states: usize,
        per_host: usize,
    ) -> Result<Self> {
        if templates.is_empty() || ranks == 0 || per_host == 0 || !(1..=ranks).contains(&states) {
            return Err(Error::Scale(format!(
                "a synthetic job needs templates ({} given), ranks ({ranks}), ranks per host \
                 ({per_host}) and 1 to {ranks} states ({states})",
                templates.len()
            )));
        }
        Ok(Self {
            ranks,
            states,
            per_host,
            templates,
            hold: None,
            pattern: Pattern::States,
        })
    }

    /// A job of `ranks` shaped as `pattern` (its first template's
    /// operations as a model), `per_host` on each host.
    pub fn with_pattern(
        templates: Vec<ProcessDump>,
        ranks: usize,
        per_host: usize,
        pattern: Pattern,
    ) -> Result<Self> {
        let mut job = Self::new(templates, ranks, 1, per_host)?;
        job.pattern = pattern;
        Ok(job)
    }

    /// Reads a spec file [`SyntheticJob::save`] wrote.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let job: Self = serde_json::from_slice(&text)
            .map_err(|e| Error::Scale(format!("{} is not a synthetic job: {e}", path.display())))?;
        let (hold, pattern) = (job.hold.clone(), job.pattern);
        let mut job = Self::new(job.templates, job.ranks, job.states, job.per_host)?;
        job.hold = hold;
        job.pattern = pattern;
        Ok(job)
    }

    /// The file the held collector of the job in `spec` writes its pid to.
    pub fn held_marker(spec: &Path) -> std::path::PathBuf {
        spec.with_extension("held")
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec(self).map_err(|e| {
            Error::Scale(format!(
                "cannot encode the synthetic job for {}: {e}",
                path.display()
            ))
        })?;
        std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    /// How many hosts (and collectors) serve it.
    pub fn hosts(&self) -> usize {
        self.ranks.div_ceil(self.per_host)
    }

    /// The name of synthetic host `index`.
    pub fn host_name(index: usize) -> String {
        format!("synthetic-{index:06}")
    }

    /// Every rank, on its host, as a starter's table would list it.
    pub fn members(&self) -> Vec<Member> {
        (0..self.ranks)
            .map(|rank| Member {
                pid: FIRST_PID + i32::try_from(rank % self.per_host).unwrap_or(0),
                host: Self::host_name(rank / self.per_host),
                rank,
                identity: i32::try_from(rank).unwrap_or(-1),
                spawned_job: None,
                spawned_by: None,
            })
            .collect()
    }

    /// The state of rank `rank`.
    pub fn state_of(&self, rank: usize) -> usize {
        rank * self.states / self.ranks
    }

    /// The ranks in state `state`.
    pub fn state_ranks(&self, state: usize) -> Range<usize> {
        let first = |s: usize| (s * self.ranks).div_ceil(self.states);
        first(state)..first(state + 1)
    }

    /// The dump of `member` (one of [`SyntheticJob::members`]).
    pub fn process(&self, member: &Member) -> ProcessDump {
        let state = self.state_of(member.rank);
        let template = &self.templates[state % self.templates.len()];
        let variant = i64::try_from(state / self.templates.len()).unwrap_or(0);
        let mut p = template.clone();
        p.pid = member.pid;
        p.global_rank = member.identity;
        p.host = None;
        let Section::Ok { value } = &mut p.communicators else {
            return p;
        };
        let world = value.list.iter().position(|c| c.name == "MPI_COMM_WORLD");
        let world_size = world.map(|w| value.list[w].size);
        for comm in &mut value.list {
            if Some(comm.size) == world_size {
                comm.size = i64::try_from(self.ranks).unwrap_or(i64::MAX);
                comm.local_rank = i64::try_from(member.rank).unwrap_or(-1);
            }
            comm.group = None;
            for class in OpClass::ALL {
                if let Section::Ok { value: queue } = comm.queue_mut(class) {
                    for op in &mut queue.operations {
                        if let Some(tag) = &mut op.desired_tag {
                            if (0..TAG_STEP).contains(tag) {
                                *tag += variant * TAG_STEP;
                            }
                        }
                    }
                }
            }
        }
        if let Some(world) = world {
            self.pattern.apply(&mut p, world, member.rank, self.ranks);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_contiguous_ranges_that_cover_the_job() {
        let template: ProcessDump = serde_json::from_str(
            r#"{"pid":0,"global_rank":0,"executable":"a","dll":{"path":"d","version":"v",
            "compatibility":2},"communicators":{"status":"ok","list":[]},
            "stats":{"fetches":0,"fetched_bytes":0,"syscalls":0,"elapsed_ms":0.0}}"#,
        )
        .unwrap();
        for (ranks, states) in [(10, 10), (1000, 10), (1001, 7), (5, 1)] {
            let job = SyntheticJob::new(vec![template.clone()], ranks, states, 3).unwrap();
            let mut next = 0;
            for s in 0..states {
                let range = job.state_ranks(s);
                assert_eq!(range.start, next);
                assert!(!range.is_empty());
                assert!(range.clone().all(|r| job.state_of(r) == s));
                next = range.end;
            }
            assert_eq!(next, ranks);
        }
        assert!(SyntheticJob::new(vec![template], 5, 6, 1).is_err());
    }
}
