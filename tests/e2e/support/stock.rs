//! What the tests of distributions' stock MPIs share (e2e/stock.rs for
//! Debian 12's, e2e/debian13.rs for Debian 13's): an mqs-dump that sees
//! only the packs and caches a test gives it, and the queues of a settled
//! `queues` job through both DLLs, without addresses.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{workspace_root, Job};
use serde_json::Value;

use super::*;

/// Our DLL of this build, refused if older than its sources.
pub fn our_dll() -> String {
    mqs_tests::our_dll(false).display().to_string()
}

/// A scratch directory of this test.
pub fn scratch(tag: &str) -> PathBuf {
    let dir =
        mqs_tests::target_dir().join(format!("mqs-scratch/stock-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The environment that makes mqs-dump see only the packs in `data`
/// (`<data>/typepacks`), a cache of its own, and the debuginfod servers
/// given (none: unset).
pub fn isolated(data: &Path, cache: &Path, debuginfod: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![
        ("MQS_DATA_DIR".to_owned(), data.display().to_string()),
        ("MQS_CACHE".to_owned(), cache.display().to_string()),
        (
            "DEBUGINFOD_URLS".to_owned(),
            debuginfod.unwrap_or("").to_owned(),
        ),
        ("DEBUGINFOD_TIMEOUT".to_owned(), "60".to_owned()),
    ];
    // No proxy between us and a loopback server.
    env.push(("NO_PROXY".to_owned(), "127.0.0.1".to_owned()));
    env
}

pub fn run_with(args: &[&str], env: &[(String, String)]) -> std::process::Output {
    run_in(None, args, env)
}

/// mqs-dump, in the network namespace `netns` (a /proc/PID/ns/net) if given.
pub fn run_in(
    netns: Option<&str>,
    args: &[&str],
    env: &[(String, String)],
) -> std::process::Output {
    let Some(netns) = netns else {
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        return run_env(args, &pairs);
    };
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={netns}"))
        .arg("--")
        .arg(mqs_dump())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("nsenter (util-linux)");
    finish_within(
        child,
        Duration::from_secs(300),
        &format!("mqs-dump {}", args.join(" ")),
    )
}

/// The dump of one rank, in JSON, once the rank has posted its blocking
/// receive (tag 1000 on mqs-wait), which it does just after READY.
pub fn settled(pid: u32, extra: &[&str], env: &[(String, String)], netns: Option<&str>) -> Value {
    settled_on("mqs-wait", pid, extra, env, netns)
}

/// [`settled`], the blocking receive being on the communicator `comm`.
pub fn settled_on(
    comm: &str,
    pid: u32,
    extra: &[&str],
    env: &[(String, String)],
    netns: Option<&str>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pid_s = pid.to_string();
        let mut args = vec!["--pid", pid_s.as_str(), "--json"];
        args.extend_from_slice(extra);
        let out = run_in(netns, &args, env);
        assert!(out.status.success(), "mqs-dump {args:?}: {}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let posted = json["processes"][0]["communicators"]["list"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["name"] == comm))
            .and_then(|c| c["receives"]["operations"].as_array())
            .is_some_and(|ops| ops.iter().any(|op| op["desired_tag"] == 1000));
        if posted || Instant::now() > deadline {
            return json;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// What a dump says of the queues, without addresses: one line per
/// communicator and per operation.
pub fn contents(json: &Value) -> Vec<String> {
    let hex = |s: &str| {
        s.split(' ')
            .map(|w| if w.starts_with("0x") { "ADDR" } else { w })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut lines = Vec::new();
    let process = &json["processes"][0];
    for c in process["communicators"]["list"]
        .as_array()
        .expect("communicators")
    {
        lines.push(format!(
            "{} size {} rank {} group {}",
            c["name"], c["size"], c["local_rank"], c["group"]
        ));
        for q in ["sends", "receives", "unexpected"] {
            let queue = &c[q];
            let Some(ops) = queue["operations"].as_array() else {
                lines.push(format!("  {q}: {}", queue["status"]));
                continue;
            };
            for op in ops {
                let text: Vec<String> = op["extra_text"]
                    .as_array()
                    .map(|t| t.iter().map(|x| hex(x.as_str().unwrap_or(""))).collect())
                    .unwrap_or_default();
                lines.push(format!(
                    "  {q}: {} peer {}/{} tag {} len {} sysbuf {} actual {}/{}/{}/{} {:?}",
                    op["status"],
                    op["desired_local_rank"],
                    op["desired_global_rank"],
                    op["desired_tag"],
                    op["desired_length"],
                    op["system_buffer"],
                    op["actual_local_rank"],
                    op["actual_global_rank"],
                    op["actual_tag"],
                    op["actual_length"],
                    text
                ));
            }
        }
    }
    lines
}

/// Each rank's queues through Open MPI's own DLL (the one the MPI names)
/// and ours, as if the vader BTL had been read and found empty (as it is
/// in a settled `queues` job): where vader's types are missing our DLL
/// says messages in transit are not listed. And how many of our queues
/// said so.
pub fn dumps(
    job: &Job,
    env: &[(String, String)],
    netns: Option<&str>,
) -> Vec<(u32, Vec<String>, Vec<String>, usize)> {
    let ours = our_dll();
    job.rank_pids()
        .into_iter()
        .map(|(rank, pid)| {
            let theirs = contents(&settled(pid, &["--dll", "mpi"], env, netns));
            let mut mine = settled(pid, &["--dll", &ours], env, netns);
            // Open MPI 5's shared-memory BTL is sm, 4.1's vader.
            let btl = if job.mpi().is_open_mpi_5() {
                "sm"
            } else {
                "vader"
            };
            let (unread, _) = as_if_transport_read(&mut mine, btl);
            assert_running_untraced(pid);
            (rank, theirs, contents(&mine), unread)
        })
        .collect()
}

pub fn packs_dir() -> PathBuf {
    workspace_root().join("typepacks")
}

/// A data directory whose typepacks/ holds copies of the committed packs,
/// each changed by `edit`.
pub fn data_with_packs(tag: &str, edit: impl Fn(&mut Value)) -> PathBuf {
    let data = scratch(tag);
    std::fs::create_dir_all(data.join("typepacks")).unwrap();
    for entry in std::fs::read_dir(packs_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "json") {
            let mut pack: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            edit(&mut pack);
            std::fs::write(
                data.join("typepacks").join(path.file_name().unwrap()),
                serde_json::to_vec_pretty(&pack).unwrap(),
            )
            .unwrap();
        }
    }
    data
}

/// Sets `type.field`'s offset in whichever pack has the type.
pub fn shift_field(pack: &mut Value, ty: &str, field: &str, by: i64) {
    // `get_mut`, not indexing: indexing a Value inserts what it lacks,
    // which would give every other pack a broken entry of that name.
    let fields = pack
        .get_mut("types")
        .and_then(|t| t.get_mut(ty))
        .and_then(|t| t.get_mut("fields"))
        .and_then(Value::as_array_mut);
    if let Some(fields) = fields {
        for f in fields {
            if f[0] == field {
                f[1] = Value::from(f[1].as_i64().unwrap() + by);
            }
        }
    }
}
