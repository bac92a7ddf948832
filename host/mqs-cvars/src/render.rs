//! Text and JSON of control-variable listings, live values, settings and
//! conformance reports.

use std::fmt::Write;

use serde::Serialize;

use crate::check::CheckReport;
use crate::compare::{LiveReport, Member};
use crate::model::{Filter, Listing, Variable};
use crate::protocol::{SetResult, SetVerdict};

/// Pretty JSON of any of the documents.
pub fn json<T: Serialize>(document: &T) -> String {
    serde_json::to_string_pretty(document)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialise: {e}\"}}"))
}

/// A listing narrowed by `filter` (the errors stay whole).
pub fn filtered(listing: &Listing, filter: &Filter) -> Listing {
    let mut out = listing.clone();
    out.variables
        .retain(|v| filter.matches(&v.name, &v.description, v.verbosity));
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A value in running text: an empty string shows as "".
fn shown(text: &str) -> String {
    match one_line(text) {
        t if t.is_empty() => "\"\"".into(),
        t => t,
    }
}

fn value_cell(v: &Variable) -> String {
    match (v.value_text(), &v.no_value) {
        (Some(text), _) => one_line(&text),
        (None, Some(why)) if why.starts_with("bound to") => "-".into(),
        (None, _) => "!".into(),
    }
}

/// The table: name, value, datatype, verbosity, scope, binding,
/// description. A value that could not be read shows `!` (the errors
/// follow the table), a bound variable `-`.
pub fn listing_text(listing: &Listing) -> String {
    let mut out = String::new();
    let version = listing
        .mpi_version
        .as_deref()
        .map(|v| format!(", {v}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} ({}{version}): {} control variables, {} shown",
        listing.library,
        listing.family.name(),
        listing.num_cvars,
        listing.variables.len()
    );
    let rows: Vec<[String; 7]> = listing
        .variables
        .iter()
        .map(|v| {
            [
                v.name.clone(),
                value_cell(v),
                v.datatype.to_string(),
                v.verbosity.to_string(),
                v.scope.to_string(),
                v.bind.to_string(),
                one_line(&v.description),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "VALUE",
        "DATATYPE",
        "VERBOSITY",
        "SCOPE",
        "BINDING",
        "DESCRIPTION",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()).take(6) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Long values (paths, lists) would push every column off the screen.
    widths[1] = widths[1].min(40);
    widths[0] = widths[0].min(48);
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&header);
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&cells);
    }
    if !listing.errors.is_empty() {
        let _ = writeln!(out, "\nMPI_T errors ({}):", listing.errors.len());
        for e in &listing.errors {
            let _ = writeln!(out, "  {e}");
        }
    }
    // Enumerations of the variables shown, each once.
    let mut shown = Vec::new();
    for v in &listing.variables {
        if let Some(e) = &v.enumeration {
            if shown.contains(&&e.name) {
                continue;
            }
            shown.push(&e.name);
            let items: Vec<String> = e
                .items
                .iter()
                .map(|i| format!("{} ({})", i.name, i.value))
                .collect();
            if shown.len() == 1 {
                let _ = writeln!(out, "\nEnumerations:");
            }
            let _ = writeln!(out, "  {}: {}", e.name, items.join(", "));
        }
    }
    out
}

fn members_text(members: &[Member]) -> String {
    let ranks: Vec<String> = members
        .iter()
        .map(|m| match m.rank {
            Some(r) => r.to_string(),
            None => format!("pid {}", m.pid),
        })
        .collect();
    let word = if members.len() == 1 { "rank" } else { "ranks" };
    format!("{word} {}", ranks.join(","))
}

/// Live values, one line per variable (per group of agreeing ranks where
/// they differ), with the default and the source where a value differs.
pub fn live_text(report: &LiveReport) -> String {
    let mut out = String::new();
    let whom = match report.launcher {
        Some(pid) => format!(
            "job of starter pid {}: {} processes",
            pid,
            report.processes.len()
        ),
        None => match report.processes.first() {
            Some(p) => format!("pid {}", p.pid),
            None => "no process".into(),
        },
    };
    let _ = writeln!(
        out,
        "Control variables of {whom}; library {} ({})",
        report.library,
        report.family.name()
    );
    let width = report
        .variables
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(0)
        .min(48);
    for v in &report.variables {
        let several = v.groups.len() > 1;
        for (i, g) in v.groups.iter().enumerate() {
            let name = if i == 0 { v.name.as_str() } else { "" };
            let who = if several {
                format!("[{}] ", members_text(&g.members))
            } else {
                String::new()
            };
            let body = match (g.value_text(), &g.no_value) {
                (Some(value), _) => {
                    let mut text = format!("= {}", shown(&value));
                    if g.differs {
                        let default = v
                            .default
                            .as_ref()
                            .map_or_else(|| "?".into(), |d| shown(&d.to_string()));
                        let from = g
                            .source
                            .as_ref()
                            .map_or_else(|| "unknown".into(), ToString::to_string);
                        let _ = write!(text, "   (default {default}; from {from})");
                    } else if let Some(source) = g
                        .source
                        .as_ref()
                        .filter(|s| **s != crate::live::Source::Default)
                    {
                        let _ = write!(text, "   (the default, set by {source})");
                    }
                    text
                }
                (None, Some(why)) => format!("not read: {why}"),
                (None, None) => "not read".into(),
            };
            let _ = writeln!(out, "{name:<width$}  {who}{body}");
        }
    }
    for f in &report.failures {
        let rank = f.rank.map(|r| format!("rank {r}, ")).unwrap_or_default();
        let _ = writeln!(out, "({rank}pid {}) not read: {}", f.pid, f.message);
    }
    out
}

/// What `--set` found, and how to apply each accepted setting.
pub fn settings_text(results: &[SetResult]) -> String {
    let mut out = String::new();
    for r in results {
        let verdict = match r.verdict {
            SetVerdict::Accepted => "valid",
            SetVerdict::StartupOnly => "valid at start-up",
            SetVerdict::NotChecked => "not checked",
            SetVerdict::Rejected => "rejected",
        };
        let what = match (&r.datatype, &r.scope) {
            (Some(d), Some(s)) => format!(" [{d}, scope {s}]"),
            _ => String::new(),
        };
        let _ = writeln!(out, "{}={}: {verdict}{what}: {}", r.name, r.value, r.reason);
        for line in &r.apply {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// One line per finding.
pub fn check_text(report: &CheckReport) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let _ = writeln!(out, "{f}");
    }
    out
}
