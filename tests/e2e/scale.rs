//! The scale harness is right before it measures anything: a synthetic
//! job of 120 ranks, 7 per host (18 synthetic collectors started by the
//! front end, the last one with 1 rank), in 10 states made from two
//! templates, read through `mqs-dump __synthetic-front` (the real
//! protocol and merge), gives every rank once, renumbered, and a job view
//! whose ranges of equal queues are the 10 states'. No MPI needed.

use std::process::{Command, Stdio};

use mqs_acquire::collect::synthetic::{SyntheticJob, FIRST_PID, FRONT_COMMAND, TAG_STEP};
use mqs_core::model::{JobDump, ProcessDump, Section};

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

#[test]
fn a_synthetic_job_merges_into_its_states() {
    let templates = vec![
        template(0, "receives", &op(1, 8, 32)),
        template(1, "sends", &op(0, 5, 400)),
    ];
    let job = SyntheticJob::new(templates, RANKS, STATES, PER_HOST).unwrap();
    let dir = mqs_tests::target_dir().join("mqs-scratch").join("scale");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("job.json");
    job.save(&spec).unwrap();

    let out = Command::new(mqs_tests::mqs_dump_binary())
        .args([FRONT_COMMAND, "--spec"])
        .arg(&spec)
        .args(["--timeout-ms", "60000", "--print-job"])
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
    let stats = lines.next().unwrap();
    assert!(lines.next().unwrap().starts_with("seconds="));
    assert!(
        stats.contains(&format!("processes={RANKS} failures=0")),
        "{stats}"
    );
    let dump: JobDump = serde_json::from_str(lines.next().unwrap()).unwrap();
    let view: Vec<&str> = lines.collect();

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
        .copied()
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
