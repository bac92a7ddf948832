//! The scale harness is right before it measures anything: a synthetic
//! job of 120 ranks, 7 per host (18 synthetic collectors started by the
//! front end, the last one with 1 rank), in 10 states made from two
//! templates, read through the harness's front end (`mqs-scale
//! scale-front`: the real protocol and merge), gives every rank once,
//! renumbered, and a job view whose ranges of equal queues are the 10
//! states'. The same job read
//! through a tree of collectors gives the same job, and a middle
//! collector killed during the dump loses its subtree's ranks only, each
//! with the reason. No MPI needed.

use std::process::{Command, Stdio};

use mqs_core::model::{JobDump, ProcessDump, Section};
use mqs_tests::scale::{Pattern, SyntheticJob, FIRST_PID, FRONT_ROLE, TAG_STEP};

const RANKS: usize = 120;
const PER_HOST: usize = 7;
const STATES: usize = 10;

/// A recorded rank of a 2-rank job with one operation on MPI_COMM_WORLD.
fn template(rank: i32, queue: &str, op: &str) -> ProcessDump {
    let empty = r#"{"status":"ok","operations":[],"truncated":null}"#;
    let queues: Vec<String> = ["sends", "receives", "unexpected"]
        .iter()
        .map(|q| {
            let body = if *q == queue {
                format!(r#"{{"status":"ok","operations":[{op}],"truncated":null}}"#)
            } else {
                empty.to_string()
            };
            format!(r#""{q}":{body}"#)
        })
        .collect();
    serde_json::from_str(&format!(
        r#"{{"pid":77,"global_rank":{rank},"executable":"a","dll":{{"path":"d","version":"v",
        "compatibility":2}},"communicators":{{"status":"ok","list":[{{"unique_id":0,
        "name":"MPI_COMM_WORLD","size":2,"local_rank":{rank},"group":[0,1],{}}}]}},
        "stats":{{"fetches":0,"fetched_bytes":0,"syscalls":0,"elapsed_ms":0.0}}}}"#,
        queues.join(",")
    ))
    .unwrap()
}

fn op(peer: i64, tag: i64, length: i64) -> String {
    format!(
        r#"{{"status":"pending","desired_local_rank":{peer},"desired_global_rank":{peer},
        "desired_tag":{tag},"desired_length":{length},"system_buffer":false,"buffer":0,
        "actual_local_rank":-1,"actual_global_rank":-1,"actual_tag":-1,"actual_length":-1,
        "extra_text":[]}}"#
    )
}

/// What the harness's front end printed: its figures, the merged job, and
/// the job view's lines.
struct Read {
    figures: String,
    dump: JobDump,
    view: Vec<String>,
}

impl Read {
    /// A number the figures line gives (`frontend_bytes=...`).
    fn figure(&self, name: &str) -> u64 {
        self.figures
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {}", self.figures))
    }
}

/// Reads the synthetic job in `spec` with collectors of fan-out `fanout`
/// (0: flat).
fn read(spec: &std::path::Path, fanout: usize) -> Read {
    read_with(spec, fanout, false)
}

/// [`read`], the collectors sending per-rank detail if `detail`.
fn read_with(spec: &std::path::Path, fanout: usize, detail: bool) -> Read {
    // The harness's program, built by cargo with this test.
    let out = Command::new(env!("CARGO_BIN_EXE_mqs-scale"))
        .args([FRONT_ROLE, "--spec"])
        .arg(spec)
        .args(["--timeout-ms", "60000", "--print-job", "--fanout"])
        .arg(fanout.to_string())
        .args(detail.then_some("--detail"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let figures = lines.next().unwrap().to_string();
    assert!(lines.next().unwrap().starts_with("seconds="));
    let dump: JobDump = serde_json::from_str(lines.next().unwrap()).unwrap();
    Read {
        figures,
        dump,
        view: lines.map(str::to_string).collect(),
    }
}

fn synthetic_job() -> SyntheticJob {
    let templates = vec![
        template(0, "receives", &op(1, 8, 32)),
        template(1, "sends", &op(0, 5, 400)),
    ];
    SyntheticJob::new(templates, RANKS, STATES, PER_HOST).unwrap()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = mqs_tests::target_dir()
        .join("mqs-scratch")
        .join(format!("scale-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_synthetic_job_merges_into_its_states() {
    let job = synthetic_job();
    let dir = scratch("flat");
    let spec = dir.join("job.json");
    job.save(&spec).unwrap();
    let Read {
        figures: stats,
        dump,
        view,
    } = read(&spec, 0);
    assert!(
        stats.contains(&format!("processes={RANKS} failures=0")),
        "{stats}"
    );

    // Every rank once, in order, renumbered, on its host.
    assert!(dump.failures.is_empty(), "{:?}", dump.failures);
    assert_eq!(dump.processes.len(), RANKS);
    for (rank, p) in dump.processes.iter().enumerate() {
        assert_eq!(p.global_rank, rank as i32);
        assert_eq!(p.pid, FIRST_PID + (rank % PER_HOST) as i32);
        assert_eq!(
            p.host.as_deref(),
            Some(SyntheticJob::host_name(rank / PER_HOST).as_str())
        );
        let Section::Ok { value } = &p.communicators else {
            panic!("rank {rank}: no communicators");
        };
        let world = &value.list[0];
        assert_eq!((world.size, world.local_rank), (RANKS as i64, rank as i64));
        assert_eq!(world.group, None);
    }

    // The job view: one range per state, with its template's operation and
    // its variant's tag.
    let world_block: Vec<&str> = view
        .iter()
        .skip_while(|l| !l.starts_with("MPI_COMM_WORLD"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(String::as_str)
        .collect();
    assert_eq!(world_block.len(), STATES, "{view:#?}");
    for state in 0..STATES {
        let ranks = job.state_ranks(state);
        assert_eq!(ranks.len(), RANKS / STATES);
        let variant = (state / 2) as i64 * TAG_STEP;
        let what = if state % 2 == 0 {
            format!("recv from rank 1 tag {}, 32 bytes", 8 + variant)
        } else {
            format!("send to rank 0 tag {}, 400 bytes", 5 + variant)
        };
        let line = format!("  ranks {}-{}: {what}", ranks.start, ranks.end - 1);
        assert!(world_block.contains(&line.as_str()), "{line}\n{view:#?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tree_of_collectors_gives_the_job_the_flat_front_end_gives() {
    let job = synthetic_job();
    let dir = scratch("tree");
    let spec = dir.join("job.json");
    job.save(&spec).unwrap();
    let flat = read(&spec, 0);
    // 18 hosts, fan-out 3: 3 roots, and hosts two and three levels down.
    let tree = read(&spec, 3);
    // A tree sends the ranks that no line of the view names by pid by
    // number (their hosts and pids in roll calls), so its runs go on
    // across hosts and hold the ranks in runs of other lengths; rank by
    // rank, pids and hosts aside, the two are the same.
    let expanded = |read: &Read| {
        let mut job = read.dump.clone();
        job.expand();
        job.processes.sort_by_key(|p| p.global_rank);
        job
    };
    let (tree_job, mut flat_job) = (expanded(&tree), expanded(&flat));
    assert!(tree_job
        .processes
        .iter()
        .all(|p| p.pid == 0 && p.host.is_none()));
    assert!(flat_job.processes.iter().all(|p| p.pid > 0));
    for p in &mut flat_job.processes {
        p.pid = 0;
        p.host = None;
    }
    assert_eq!(
        serde_json::to_value(&tree_job).unwrap(),
        serde_json::to_value(&flat_job).unwrap(),
        "the merged jobs differ"
    );
    assert_eq!(tree.view, flat.view);
    assert_eq!(tree_job.processes.len(), RANKS);
    // Equal states travel once: the front end receives less than a third
    // (at 120 ranks the hellos and the runs' counters are much of it).
    let (t, f) = (tree.figure("frontend_bytes"), flat.figure("frontend_bytes"));
    assert!(t * 3 < f, "tree {t} bytes, flat {f}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_middle_collector_killed_during_the_dump_loses_its_subtree_only() {
    let mut job = synthetic_job();
    // Fan-out 3 over 18 hosts: host 3 is a child of host 0 and the parent
    // of hosts 12, 13 and 14.
    let middle = SyntheticJob::host_name(3);
    job.hold = Some(middle.clone());
    let dir = scratch("kill");
    let spec = dir.join("job.json");
    job.save(&spec).unwrap();
    let marker = SyntheticJob::held_marker(&spec);
    let front = std::thread::spawn({
        let spec = spec.clone();
        move || read(&spec, 3)
    });
    // Once it holds (told to go, its children sending to it): kill -9.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "{middle} never held");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Our own descendant, named by the pid it wrote.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains(&middle));
    let collector = mqs_tests::record(pid).expect("the held collector runs");
    assert!(collector.kill(), "cannot kill the held collector");
    let read = front.join().unwrap();

    let lost_hosts: Vec<usize> = vec![3, 12, 13, 14];
    let lost = |rank: usize| lost_hosts.contains(&(rank / PER_HOST));
    let dumped: Vec<usize> = read
        .dump
        .processes
        .iter()
        .map(|p| p.global_rank as usize)
        .collect();
    let expected: Vec<usize> = (0..RANKS).filter(|r| !lost(*r)).collect();
    assert_eq!(dumped, expected, "every rank outside the subtree is shown");
    let mut failed: Vec<usize> = read.dump.failures.iter().map(|f| f.rank).collect();
    failed.sort_unstable();
    let expected: Vec<usize> = (0..RANKS).filter(|r| lost(*r)).collect();
    assert_eq!(failed, expected, "every rank of the subtree is reported");
    for f in &read.dump.failures {
        assert!(
            f.message
                .contains(&format!("the collector on host '{middle}' was lost")),
            "rank {}: {}",
            f.rank,
            f.message
        );
    }
    assert!(
        read.view
            .iter()
            .any(|l| l.contains("not dumped") && l.contains(&middle)),
        "{:#?}",
        read.view
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Jobs shaped as real ones (every rank's own addresses, counters, thread
/// ids and peers): through a tree, the job view and the analysis are a
/// flat collection's, the view fits a screen with the outliers named,
/// the front end receives a fraction of the bytes (for a ring whose ranks
/// also wait on rank 0, as few as for the ring); with per-rank detail the
/// tree gives every rank's dump exactly as flat does.
#[test]
fn real_patterns_through_a_tree_read_as_flat_in_a_few_lines() {
    const N: usize = 2000;
    let mut tree_bytes = std::collections::HashMap::new();
    for pattern in [
        Pattern::Ring,
        Pattern::Halo,
        Pattern::Grid,
        Pattern::Outliers,
        Pattern::Hub,
    ] {
        let templates = vec![template(0, "receives", &op(1, 8, 32))];
        let job = SyntheticJob::with_pattern(templates, N, 100, pattern).unwrap();
        let dir = scratch(pattern.name());
        let spec = dir.join("job.json");
        job.save(&spec).unwrap();
        let flat = read(&spec, 0);
        let tree = read(&spec, 3);
        let name = pattern.name();
        assert_eq!(tree.view, flat.view, "{name}: the views differ");
        assert!(
            tree.view.len() <= 40,
            "{name}: {} lines:\n{}",
            tree.view.len(),
            tree.view.join("\n")
        );
        // Each line's ranks fit a screen's width, however many runs they
        // are (a halo's faces: rows in plane after plane).
        for line in tree.view.iter().filter(|l| l.starts_with("  ")) {
            let ranks = line.trim_start().split(": ").next().unwrap_or_default();
            assert!(ranks.len() <= 90, "{name}: {line}");
        }
        // Told by its grid, the halo is one line.
        if pattern == Pattern::Grid {
            let recv = |offset: &str, tag: i64| format!("recv from {offset} tag {tag}, 32 bytes");
            let ops: Vec<String> = [
                "(0,0,-1)", "(0,0,+1)", "(0,-1,0)", "(0,+1,0)", "(-1,0,0)", "(+1,0,0)",
            ]
            .iter()
            .zip(10..)
            .map(|(offset, tag)| recv(offset, tag))
            .collect();
            let lines: Vec<&String> = tree.view.iter().filter(|l| l.starts_with("  ")).collect();
            assert_eq!(
                lines,
                [&format!("  ranks 0-1999: {}", ops.join("; "))],
                "{name}"
            );
            assert!(
                tree.view
                    .iter()
                    .any(|l| l.ends_with("; a 20x10x10 grid, periodic):")),
                "{name}: {:#?}",
                tree.view
            );
        }
        let words = |dump: &JobDump| {
            let job = mqs_analysis::Job::new(dump);
            mqs_analysis::Analysis::new(&job).words()
        };
        assert_eq!(words(&tree.dump), words(&flat.dump), "{name}: --deadlock");
        // The outliers (nothing pending) are named in the summary.
        let outliers: mqs_analysis::RankSet =
            pattern.outliers(N).iter().map(|&r| r as i64).collect();
        let named = format!("nothing pending: {outliers}");
        assert!(tree.view[0].ends_with(&named), "{name}: {}", tree.view[0]);
        let (t, f) = (tree.figure("frontend_bytes"), flat.figure("frontend_bytes"));
        assert!(t * 10 < f, "{name}: tree {t} bytes, flat {f}");
        tree_bytes.insert(name, t);
        let detailed = read_with(&spec, 3, true);
        assert!(
            serde_json::to_value(&detailed.dump).unwrap()
                == serde_json::to_value(&flat.dump).unwrap(),
            "{name}: with per-rank detail the tree's ranks differ from flat's"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // Rank 0, that every rank of the hub job also waits on, stays fixed in
    // the collectors' relative states: the job travels as few states as the
    // ring (each rank a state of its own would be about 12 times the ring's
    // bytes).
    let (hub, ring) = (tree_bytes["hub"], tree_bytes["ring"]);
    assert!(hub <= 3 * ring, "the hub job: {hub} bytes, the ring {ring}");
}
