//! Collectors: ranks on other hosts read by `mqs-dump __collector` there,
//! started by the job's own starter (Open MPI 4.1.4's MPIR tool-daemon
//! launch) or by `--launcher`, their dumps merged into one job.
//!
//! Two nodes on this one machine as `mpirun` sees them (`Nodes`: each its own
//! PID and UTS namespace and TMPDIR, reached through an rsh launch agent), so
//! that, as on a cluster, the starter's table lists node-local pids only a
//! collector inside the node can read. The merged result is compared rank by
//! rank with direct dumps made inside each node (`nsenter`), and, on one
//! node, `--collect` with a direct attach.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqs_core::interface::Target;
use mqs_core::process::{LiveProcess, Mode};
use mqs_tests::{Job, LaunchOptions, Mpi, Nodes, JOB_ENV};
use serde_json::Value;
use support::stop::*;
use support::*;

const NODES: [&str; 2] = ["nodea", "nodeb"];
const FOUR: [&str; 4] = ["nodea", "nodeb", "nodec", "noded"];

/// A job of `fixture` with `ranks` ranks on the nodes, `slots` per node
/// before mpirun wraps around (ranks 0, 1... fill nodea first).
fn job_on(nodes: &Nodes, fixture: &str, ranks: u32, slots: u32, args: &[&str]) -> Job {
    let options = LaunchOptions {
        env: nodes.openmpi_env(slots).expect("node settings"),
        node_local_pids: true,
        ..LaunchOptions::default()
    };
    Job::launch_with(Mpi::OpenMpiG, fixture, ranks, args, &options).expect("a job on the nodes")
}

/// The queues fixture's state, as far as needed to know a dump is not
/// empty: rank 0's receive tag 7 on mqs-dup, rank 1's rendezvous send.
fn assert_queues_state(dump: &Value) {
    let ranks = by_rank(dump);
    let ops = |rank: i64, comm: &str, queue: &str| -> Vec<(i64, i64)> {
        ranks[&rank]["communicators"]["list"]
            .as_array()
            .expect("communicators")
            .iter()
            .filter(|c| c["name"] == comm)
            .flat_map(|c| {
                c[queue]["operations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|o| {
                (
                    o["desired_tag"].as_i64().unwrap_or(-1),
                    o["desired_length"].as_i64().unwrap_or(-1),
                )
            })
            .collect()
    };
    assert!(ops(0, "mqs-dup", "receives").contains(&(7, 16)), "{dump}");
    assert!(
        ops(1, "MPI_COMM_WORLD", "sends").contains(&(5, 400000)),
        "{dump}"
    );
}

/// Direct dumps of each rank made inside its node (node-local pids).
fn direct_in_nodes(
    nodes: &Nodes,
    job: &Job,
    hosts: &BTreeMap<i64, String>,
) -> BTreeMap<i64, Value> {
    job.rank_pids()
        .into_iter()
        .map(|(rank, pid)| {
            let node = &hosts[&i64::from(rank)];
            let out = nodes
                .command_in(node, mqs_dump())
                .expect("nsenter")
                .args(["--pid", &pid.to_string(), "--json"])
                .stdin(Stdio::null())
                .output()
                .expect("run mqs-dump in a node");
            let dump = succeeded(out, &format!("a direct dump of rank {rank} in {node}"));
            (i64::from(rank), dump["processes"][0].clone())
        })
        .collect()
}

/// The job's processes that run `name` (ranks or collectors), as this
/// machine sees them.
fn job_processes(job: &Job, matches: impl Fn(&[String]) -> bool) -> Vec<u32> {
    mqs_tests::processes_with_env(JOB_ENV, job.id())
        .into_iter()
        .filter(|r| mqs_tests::process_cmdline(r.pid).is_some_and(|c| matches(&c)))
        .map(|r| r.pid)
        .collect()
}

/// What mqs-dump leaves in a job: every rank runs untraced, no collector is
/// left, and the starter is untraced with its tool-daemon variables as
/// they were (empty).
fn assert_left_alone(job: &Job, ranks: usize) {
    let exe = job.executable().to_path_buf();
    let ranks_found = job_processes(job, |c| c.first().is_some_and(|a| Path::new(a) == exe));
    assert_eq!(ranks_found.len(), ranks, "the job's ranks: {ranks_found:?}");
    for pid in ranks_found {
        assert_running_untraced(pid);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = job_processes(job, |c| c.iter().any(|a| a == "__collector"));
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "collectors still running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let starter = job.launcher_pid();
    assert_running_untraced(starter);
    let process = LiveProcess::attach(starter as i32, Mode::NoStop).expect("the starter");
    let symbols = mqs_acquire::inspect::index_symbols(&process, &[]).expect("starter symbols");
    for (name, len) in [
        ("MPIR_executable_path", 256),
        ("MPIR_server_arguments", 1024),
        ("MPIR_being_debugged", 4),
    ] {
        let addr = mqs_core::interface::ImageSymbols::find_symbol(&*symbols, name).expect(name);
        let mut bytes = vec![1u8; len];
        process.read(addr, &mut bytes).expect(name);
        assert!(bytes.iter().all(|&b| b == 0), "{name} was not put back");
    }
}

/// A dump's failures: (rank, host, message).
fn failures_of(dump: &Value) -> Vec<(i64, String, String)> {
    dump["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            (
                f["rank"].as_i64().unwrap(),
                f["host"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A directory of its own for a test's scripts, removed when dropped
/// (also when the test fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mqs-collect-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn two_nodes_through_the_starters_tool_daemon_launch_equal_direct_dumps_in_each_node() {
    let nodes = Nodes::start(&NODES).expect("nodes");
    let job = job_on(&nodes, "queues", 2, 1, &[]);
    let mpirun = job.launcher_pid().to_string();
    let dir = Scratch::new("two");

    // By itself: both ranks are on other hosts, so mpirun starts
    // collectors there (Open MPI's tool-daemon launch, its attach FIFO).
    let (out, took) = timed(&["--pid", &mpirun, "--json"]);
    let merged = succeeded(out, "mqs-dump --pid mpirun");
    eprintln!("two nodes through the starter: {took:?}");
    assert_eq!(merged["failures"], serde_json::json!([]));
    let hosts = hosts_of(&merged);
    assert_eq!(
        hosts.values().collect::<Vec<_>>(),
        NODES
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
    // The table's node-local pids: the same number on both nodes, here.
    for (rank, pid) in job.rank_pids() {
        assert_eq!(by_rank(&merged)[&i64::from(rank)]["pid"], pid);
    }
    assert_queues_state(&merged);

    // The same ranks read directly inside each node.
    let direct = direct_in_nodes(&nodes, &job, &hosts);
    assert_same_ranks(&merged, &direct, "through the starter vs in each node");

    // A collector with a wrong token is refused and logged on both sides;
    // the right one is then served as usual.
    let log = dir.join("wrapper.log");
    let wrapper = dir.join("knock-first");
    script(
        &wrapper,
        &format!(
            "#!/bin/sh\n\
             # knocks with a wrong token, then runs the real collector\n\
             prev=; bad=\n\
             for a in \"$@\"; do\n\
               if [ \"$prev\" = --token ]; then bad=\"$bad 0123456789abcdef0123456789abcdef\"; \
             else bad=\"$bad $a\"; fi\n\
               prev=$a\n\
             done\n\
             {mqs} $bad >>{log} 2>&1\n\
             echo \"wrong token: exit $?\" >>{log}\n\
             exec {mqs} \"$@\"\n",
            mqs = mqs_dump().display(),
            log = log.display()
        ),
    );
    let (out, _) = timed(&[
        "--pid",
        &mpirun,
        "--json",
        "--collector",
        wrapper.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    let knocked = succeeded(out, "with a collector that knocks with a wrong token first");
    assert_same_ranks(&knocked, &direct, "after a wrong token");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        logged.matches("wrong token: exit 14").count(),
        2,
        "both nodes' wrong-token collectors end with exit code 14: {logged}"
    );
    assert_eq!(logged.matches(": wrong token").count(), 2, "{logged}");
    assert!(logged.contains("refused by the front end at"), "{logged}");
    assert_eq!(
        err.matches("refused a collector connection from").count(),
        2,
        "the front end logs each refusal: {err}"
    );
    assert!(err.contains("wrong token (it says it is pid"), "{err}");

    // --launcher, per host ('ssh {host}' style: the agent is what ssh is
    // to mpirun) and for all hosts at once (srun style).
    let agent = nodes.agent();
    let per_host = format!("{} {{host}}", agent.display());
    let srun = dir.join("fake-srun");
    script(
        &srun,
        &format!(
            "#!/bin/sh\n\
             # srun --nodelist=a,b --ntasks-per-node=1 command...: one per node\n\
             hosts=${{1#--nodelist=}}; shift; shift\n\
             for h in $(echo $hosts | tr , ' '); do {agent} $h \"$@\" & done\n\
             wait\n",
            agent = agent.display()
        ),
    );
    let all_hosts = format!(
        "{} --nodelist={{hosts}} --ntasks-per-node=1",
        srun.display()
    );
    for template in [per_host.as_str(), all_hosts.as_str()] {
        let (out, _) = timed(&["--pid", &mpirun, "--json", "--launcher", template]);
        let launched = succeeded(out, &format!("--launcher '{template}'"));
        assert_eq!(hosts_of(&launched), hosts, "{template}");
        assert_same_ranks(&launched, &direct, template);
    }

    // The collectors in a tree (fan-out 1: nodeb's collector reports
    // through nodea's), through the starter and through a launcher: the
    // same job as flat.
    for launcher in [None, Some(per_host.as_str())] {
        let mut args = vec!["--pid", &mpirun, "--json", "--fanout", "1"];
        args.extend(launcher.iter().flat_map(|t| ["--launcher", *t]));
        let (out, _) = timed(&args);
        let tree = succeeded(out, &format!("--fanout 1, launcher {launcher:?}"));
        assert_eq!(tree["failures"], serde_json::json!([]));
        assert_eq!(hosts_of(&tree), hosts);
        assert_same_ranks(&tree, &direct, "a tree of collectors");
        assert_same_ranks(&tree, &by_rank(&merged), "a tree of collectors vs flat");
    }

    assert_left_alone(&job, 2);
    job.shutdown().expect("teardown");
}

/// Open MPI 5's `prterun` has no MPIR symbols: its job comes from its PMIx
/// process table, and with no tool-daemon variables to start collectors
/// through, ranks on other hosts are reached the way prterun reaches its
/// daemons: with its remote shell (here the nodes' agent, set as
/// `PRTE_MCA_plm_ssh_agent`), so `--pid <prterun>` alone reads every rank.
/// With `--launcher` the same. Both equal direct dumps in each node.
#[test]
fn open_mpi_5_on_two_nodes_through_prterun_alone_and_with_a_launcher_equals_direct_dumps() {
    let nodes = Nodes::start(&NODES).expect("nodes");
    let options = LaunchOptions {
        env: nodes.prrte_env(1).expect("node settings"),
        node_local_pids: true,
        ..LaunchOptions::default()
    };
    let job = Job::launch_with(Mpi::OpenMpi5G, "queues", 2, &[], &options)
        .expect("an Open MPI 5 job on the nodes");
    let prterun = job.launcher_pid().to_string();
    let names: Vec<String> = NODES.iter().map(|n| n.to_string()).collect();

    let (out, took) = timed(&["--pid", &prterun, "--json"]);
    let alone = succeeded(out, "mqs-dump --pid prterun");
    eprintln!("Open MPI 5, two nodes through prterun's remote shell: {took:?}");
    assert_eq!(alone["failures"], serde_json::json!([]));
    let hosts = hosts_of(&alone);
    assert_eq!(hosts.values().cloned().collect::<Vec<_>>(), names);
    assert_queues_state(&alone);
    let direct = direct_in_nodes(&nodes, &job, &hosts);
    assert_same_ranks(&alone, &direct, "through prterun alone vs in each node");

    let template = format!("{} {{host}}", nodes.agent().display());
    let (out, took) = timed(&["--pid", &prterun, "--json", "--launcher", &template]);
    let merged = succeeded(out, "mqs-dump --pid prterun --launcher");
    eprintln!("Open MPI 5, two nodes through prterun and a launcher: {took:?}");
    assert_eq!(merged["failures"], serde_json::json!([]));
    assert_eq!(hosts_of(&merged), hosts);
    assert_same_ranks(
        &merged,
        &direct,
        "through prterun and a launcher vs in each node",
    );

    let exe = job.executable().to_path_buf();
    let ranks = job_processes(&job, |c| c.first().is_some_and(|a| Path::new(a) == exe));
    assert_eq!(ranks.len(), 2, "the job's ranks: {ranks:?}");
    for pid in ranks {
        assert_running_untraced(pid);
    }
    assert_running_untraced(job.launcher_pid());
    job.shutdown().expect("teardown");
}

#[test]
fn ranks_whose_collector_never_calls_back_are_reported_and_the_rest_shown() {
    let nodes = Nodes::start(&NODES).expect("nodes");
    let job = job_on(&nodes, "ring", 4, 2, &[]);
    let mpirun = job.launcher_pid().to_string();
    let dir = Scratch::new("unreachable");

    // nodeb cannot be reached: its launcher command fails at once, and its
    // ranks are reported with what it said; nodea's are shown.
    let broken = dir.join("broken-ssh");
    script(
        &broken,
        &format!(
            "#!/bin/sh\n\
             if [ \"$1\" = nodeb ]; then echo \"ssh: connect to host nodeb port 22: \
             Connection refused\" >&2; exit 255; fi\n\
             exec {} \"$@\"\n",
            nodes.agent().display()
        ),
    );
    let template = format!("{} {{host}}", broken.display());
    let (out, took) = timed(&["--pid", &mpirun, "--json", "--launcher", &template]);
    assert_eq!(out.status.code(), Some(14), "{}", stderr(&out));
    let dump = json(&out);
    let shown: Vec<i64> = by_rank(&dump).into_keys().collect();
    let failed = failures_of(&dump);
    // slots=2: ranks 0 and 1 on nodea, 2 and 3 on nodeb.
    assert_eq!(shown, [0, 1], "{dump}");
    assert_eq!(failed.iter().map(|f| f.0).collect::<Vec<_>>(), [2, 3]);
    for (_, host, message) in &failed {
        assert_eq!(host, "nodeb");
        assert!(
            message.contains("ended (exit status: 255) before a collector called back"),
            "{message}"
        );
        assert!(message.contains("Connection refused"), "{message}");
    }
    assert!(
        took < Duration::from_secs(25),
        "a failed launch is reported at once: {took:?}"
    );

    // A collector that never calls back (here: a program that just exits):
    // after the timeout the ranks are reported with how collectors were
    // asked for; with no rank read at all, that is the one-line error.
    let (out, took) = timed(&[
        "--pid",
        &mpirun,
        "--json",
        "--collector",
        "/bin/true",
        "--collector-timeout",
        "3",
    ]);
    assert_error(
        &out,
        14,
        &[
            "rank 0 (pid ",
            "no collector called back from host 'nodea' within 3 s (asked of the starter \
             through its attach FIFO",
        ],
    );
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(
        took < Duration::from_secs(40),
        "bounded by the timeout: {took:?}"
    );

    assert_left_alone(&job, 4);
    job.shutdown().expect("teardown");
}

/// Three nodes whose collectors form a chain (fan-out 1: nodec's reports
/// through nodeb's, nodeb's through nodea's), each loading the blocking
/// test DLL with a block directory of its own under `dir`. Only the
/// collector on `blocked` blocks (the others are released before they
/// start); with `kill_there`, its wrapper kills it -9 once it is inside.
fn chain_collector(dir: &Path, blocked: &str, kill_there: bool) -> PathBuf {
    let wrapper = dir.join("collector");
    let then = if kill_there {
        format!(
            "{mqs} \"$@\" & pid=$!\n\
             i=0\n\
             while [ ! -e $MQS_TEST_BLOCK_DIR/inside ] && [ $i -lt 600 ]; do \
             sleep 0.1; i=$((i+1)); done\n\
             [ -e $MQS_TEST_BLOCK_DIR/inside ] && echo inside >{dir}/killed-inside\n\
             kill -9 $pid\n\
             wait $pid\n",
            dir = dir.display(),
            mqs = mqs_dump().display()
        )
    } else {
        format!("exec {} \"$@\"\n", mqs_dump().display())
    };
    script(
        &wrapper,
        &format!(
            "#!/bin/sh\n\
             node=$(hostname)\n\
             export MQS_TEST_BLOCK_DIR={dir}/$node\n\
             mkdir -p $MQS_TEST_BLOCK_DIR\n\
             if [ \"$node\" != {blocked} ]; then touch $MQS_TEST_BLOCK_DIR/release; \
             exec {mqs} \"$@\"; fi\n\
             {then}",
            dir = dir.display(),
            mqs = mqs_dump().display()
        ),
    );
    wrapper
}

const CHAIN: [&str; 3] = ["nodea", "nodeb", "nodec"];

/// The file in its block directory that lets the blocking test DLL out
/// (tests/support/test_dll.c).
const LET_OUT: &str = "release";

/// kill -9 of the collector on `victim` (of the chain) while it is inside
/// its DLL with its ranks stopped: its ranks and those below it are
/// reported out of reach with the reason, the others are shown, no rank is
/// left stopped or traced, no collector is left, and the job runs on.
fn collector_killed_during_the_dump(victim: &str) {
    let nodes = Nodes::start(&CHAIN).expect("nodes");
    let job = job_on(&nodes, "ring", 3, 1, &[]);
    let mpirun = job.launcher_pid().to_string();
    let dir = Scratch::new(&format!("tree-kill-{victim}"));
    let blocking = support_program("test_dll", &["-DBLOCK_IN_DLL"], true);
    let wrapper = chain_collector(&dir, victim, true);
    let (out, _) = timed(&[
        "--pid",
        &mpirun,
        "--json",
        "--fanout",
        "1",
        "--collector",
        wrapper.to_str().unwrap(),
        "--dll",
        blocking.to_str().unwrap(),
        "--collector-timeout",
        "10",
    ]);
    assert!(
        dir.join("killed-inside").exists(),
        "{victim}'s collector was not killed inside the DLL: {}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(14), "{}", stderr(&out));
    let dump = json(&out);
    // One rank per node, in the chain's order.
    let at = CHAIN.iter().position(|n| *n == victim).unwrap() as i64;
    let shown: Vec<i64> = by_rank(&dump).into_keys().collect();
    assert_eq!(shown, (0..at).collect::<Vec<_>>(), "{dump}");
    for (rank, host) in hosts_of(&dump) {
        assert_eq!(host, CHAIN[rank as usize]);
    }
    let failed = failures_of(&dump);
    assert_eq!(
        failed.iter().map(|f| f.0).collect::<Vec<_>>(),
        (at..3).collect::<Vec<_>>()
    );
    for (rank, host, message) in &failed {
        assert_eq!(host, CHAIN[*rank as usize]);
        assert!(
            message.contains(&format!("the collector on host '{victim}' was lost")),
            "{message}"
        );
    }
    assert_left_alone(&job, 3);
    job.shutdown().expect("teardown");
}

#[test]
fn a_middle_collector_killed_during_the_dump_loses_its_subtree_and_leaves_every_rank_running() {
    collector_killed_during_the_dump("nodeb");
}

#[test]
fn a_leaf_collector_killed_during_the_dump_loses_its_ranks_only() {
    collector_killed_during_the_dump("nodec");
}

/// kill -9 of mqs-dump itself while the middle collector of a chain is
/// inside its DLL with its ranks stopped: once that collector is let out,
/// every rank runs untraced, no collector is left, and the job runs on.
#[test]
fn the_front_end_killed_during_a_tree_dump_leaves_every_rank_running() {
    let nodes = Nodes::start(&CHAIN).expect("nodes");
    let job = job_on(&nodes, "ring", 3, 1, &[]);
    let mpirun = job.launcher_pid().to_string();
    let dir = Scratch::new("tree-kill-front");
    let blocking = support_program("test_dll", &["-DBLOCK_IN_DLL"], true);
    let wrapper = chain_collector(&dir, "nodeb", false);
    let mut front = Command::new(mqs_dump())
        .args(["--pid", &mpirun, "--json", "--fanout", "1", "--collector"])
        .arg(&wrapper)
        .arg("--dll")
        .arg(&blocking)
        .args(["--collector-timeout", "10"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mqs-dump");
    let inside = dir.join("nodeb").join("inside");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !inside.exists() {
        assert!(
            front.try_wait().unwrap().is_none(),
            "mqs-dump ended before nodeb's collector was inside the DLL"
        );
        assert!(
            Instant::now() < deadline,
            "nodeb's collector never got inside"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL: our own child, by its handle; nothing of ours runs after.
    front.kill().expect("kill mqs-dump");
    let _ = front.wait();
    std::fs::write(dir.join("nodeb").join(LET_OUT), b"go").expect("let nodeb's collector out");
    assert_left_alone(&job, 3);
    job.shutdown().expect("teardown");
}

#[test]
fn a_job_dumped_through_collectors_runs_on_and_completes() {
    let nodes = Nodes::start(&NODES).expect("nodes");
    let dir = Scratch::new("finish");
    let stop = dir.join("stop");
    let job = job_on(&nodes, "finish", 2, 1, &[stop.to_str().unwrap(), "300"]);
    let mpirun = job.launcher_pid().to_string();

    let (out, _) = timed(&["--pid", &mpirun, "--json"]);
    let dump = succeeded(out, "dumping the finish job");
    assert_eq!(by_rank(&dump).len(), 2, "{dump}");
    assert_eq!(
        hosts_of(&dump).into_values().collect::<Vec<_>>(),
        ["nodea", "nodeb"]
    );
    assert_left_alone(&job, 2);

    std::fs::write(&stop, "").expect("stop file");
    let deadline = Instant::now() + Duration::from_secs(60);
    while job.output().0.matches("DONE rank=").count() < 2 {
        assert!(
            Instant::now() < deadline,
            "the job did not complete: {:?}",
            job.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = job
        .wait_for_exit(Duration::from_secs(60))
        .expect("the job ends");
    assert!(status.success(), "{status}");
}

#[test]
fn collect_on_one_node_equals_a_direct_attach() {
    let job = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("queues job");
    let mpirun = job.launcher_pid().to_string();
    let direct = succeeded(timed(&["--pid", &mpirun, "--json"]).0, "a direct dump");
    let (out, took) = timed(&["--pid", &mpirun, "--json", "--collect"]);
    let collected = succeeded(out, "mqs-dump --collect");
    eprintln!("one node, --collect: {took:?}");
    assert_queues_state(&direct);
    assert_same_ranks(&collected, &by_rank(&direct), "--collect vs direct");
    // Read by a collector: each says where; read directly: none does.
    let here = nix_hostname();
    assert!(
        hosts_of(&collected).values().all(|h| *h == here),
        "{collected}"
    );
    assert!(hosts_of(&direct).values().all(String::is_empty));
    assert_left_alone(&job, 2);
    job.shutdown().expect("teardown");
}

/// Two jobs on the nodes, both starters named (`--pid A --pid B`): each
/// one's ranks on other hosts are read by collectors it starts, all four
/// stopped together and numbered as one job (the second's ranks after the
/// first's), each rank as a dump of its own job alone reads it.
#[test]
fn two_starters_named_together_each_start_their_collectors() {
    let nodes = Nodes::start(&NODES).expect("nodes");
    let first = job_on(&nodes, "queues", 2, 1, &[]);
    let second = job_on(&nodes, "queues", 2, 1, &[]);
    let (a, b) = (
        first.launcher_pid().to_string(),
        second.launcher_pid().to_string(),
    );
    let (out, took) = timed(&["--pid", &a, "--pid", &b, "--json"]);
    let both = succeeded(out, "mqs-dump --pid A --pid B");
    eprintln!("two starters through their collectors: {took:?}");
    assert_eq!(both["failures"], serde_json::json!([]), "{both}");
    let hosts: Vec<String> = hosts_of(&both).into_values().collect();
    assert_eq!(hosts, ["nodea", "nodeb", "nodea", "nodeb"], "{both}");
    // The same processes as each job dumped alone, less the numbering.
    let unnumbered = |p: &Value| {
        let mut p = comparable(p);
        p.as_object_mut().unwrap().remove("global_rank");
        p
    };
    let together = by_rank(&both);
    for (offset, pid) in [(0, &a), (2, &b)] {
        let alone = succeeded(timed(&["--pid", pid, "--json"]).0, "one job alone");
        assert_queues_state(&alone);
        for (rank, process) in by_rank(&alone) {
            assert_eq!(
                unnumbered(&together[&(rank + offset)]),
                unnumbered(&process),
                "rank {rank} of the job of starter {pid}"
            );
        }
    }
    assert_left_alone(&first, 2);
    assert_left_alone(&second, 2);
    first.shutdown().expect("teardown");
    second.shutdown().expect("teardown");
}

/// A real job at some scale: a 64-rank halo exchange on four nodes (16
/// ranks on each), one rank stopped mid-run so that the others block on
/// it. Read flat (`--fanout 0`: every collector reports to mqs-dump) and
/// through a tree (`--fanout 2`: two collectors report, each merging one
/// below it), the job view and `--deadlock`'s words are the same, and the
/// view of 64 ranks fits a screen (at most 15 lines), the stopped rank
/// named.
#[test]
fn a_64_rank_halo_on_four_nodes_reads_the_same_through_a_tree_as_flat_on_one_screen() {
    const STOPPED: u32 = 37; // on nodec
    let nodes = Nodes::start(&FOUR).expect("nodes");
    let job = job_on(&nodes, "halo", 64, 16, &[]);
    let mpirun = job.launcher_pid().to_string();
    let local = job.rank_pid(STOPPED).expect("the stopped rank's pid");
    let pid = nodes
        .global_pid("nodec", local)
        .expect("nodec's namespace")
        .expect("the stopped rank on nodec");
    signal(pid, libc::SIGSTOP);
    let mut resume = Resume(Some(pid));
    until_stopped(pid, true);

    // The others block on it within an iteration or two; read the job
    // until two flat views agree (it has settled), bounded.
    let view = |fanout: &str, extra: &[&str]| {
        let mut args = vec!["--pid", mpirun.as_str(), "--fanout", fanout];
        args.extend_from_slice(extra);
        let (out, took) = timed(&args);
        eprintln!("64-rank halo, --fanout {fanout} {extra:?}: {took:?}");
        (out.status.code(), untimed(&stdout(&out)), stderr(&out))
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut flat = view("0", &[]);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let again = view("0", &[]);
        if again == flat {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the job never settled: {}\n---\n{}",
            flat.1,
            again.1
        );
        flat = again;
    }
    let (code, text, err) = &flat;
    assert_eq!(*code, Some(0), "{err}");
    let lines = text.lines().count();
    assert!(lines <= 15, "a view of {lines} lines:\n{text}");
    assert!(
        text.contains(&format!(
            "rank {STOPPED} (pid {local} on nodec) is stopped by a signal"
        )),
        "the stopped rank is not named:\n{text}"
    );
    let tree = view("2", &[]);
    assert_eq!(tree, flat, "the tree's view differs from flat's");

    let flat_deadlock = view("0", &["--deadlock"]);
    let tree_deadlock = view("2", &["--deadlock"]);
    assert_eq!(
        tree_deadlock, flat_deadlock,
        "the tree's --deadlock differs from flat's"
    );
    assert!(
        flat_deadlock
            .1
            .contains(&format!("the chain waits for rank {STOPPED}")),
        "{}",
        flat_deadlock.1
    );
    assert_eq!(state(pid), Some('T'), "the stopped rank was resumed");
    signal(pid, libc::SIGCONT);
    resume.0 = None;
    until_stopped(pid, false);
    assert_left_alone(&job, 64);
    job.shutdown().expect("teardown");
}

/// A view without the time its reading took (the first line's "read in
/// 1.23 s"), which differs from one dump to the next.
fn untimed(view: &str) -> String {
    view.lines()
        .map(|line| match line.find("; read in ") {
            Some(at) => {
                let rest = &line[at + "; read in ".len()..];
                let end = rest.find(" s").map_or(rest.len(), |e| e + 2);
                format!("{}{}", &line[..at], &rest[end..])
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn nix_hostname() -> String {
    let out = Command::new("hostname").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Debian's hydra on two hosts, this one and a node: its `mpiexec` keeps
/// no process table, so `mqs-dump --pid <mpiexec>` reads the ranks below
/// it here and names each of the others as not read, saying where they
/// can be read; done as it says (`mqs-dump --pid <hydra_pmi_proxy>` in
/// the node), that reads them (and names this host's as the ones it
/// cannot see).
#[test]
fn hydra_on_two_hosts_names_the_ranks_it_cannot_see_and_its_proxy_reads_them() {
    let nodes = Nodes::start(&["nodeh"]).expect("nodes");
    let mpi = Mpi::DebianMpich;
    let exe = mqs_tests::build_fixture(mpi, "ring").expect("the ring for Debian's MPICH");
    let mut cmd = Command::new(mpi.launcher().expect("Debian's mpiexec"));
    cmd.args(["-launcher", "ssh", "-launcher-exec"])
        .arg(nodes.agent())
        .args(["-hosts", "localhost:2,nodeh:2", "-n", "4"])
        .arg(&exe);
    let options = LaunchOptions {
        // Two hosts share no memory: UCX over TCP on the loopback.
        env: vec![
            ("UCX_TLS".into(), "self,tcp".into()),
            ("UCX_NET_DEVICES".into(), "lo".into()),
        ],
        node_local_pids: true,
        ..LaunchOptions::default()
    };
    let job = Job::launch_command(mpi, "ring", exe, 4, cmd, &Job::new_id("ring"), &options)
        .expect("the ring on this host and the node");
    let mpiexec = job.launcher_pid().to_string();

    let (out, _) = timed(&["--pid", &mpiexec, "--json"]);
    let dump = json(&out);
    assert_eq!(
        listed_ranks(&dump, "processes", "global_rank"),
        [0, 1],
        "{dump:#}"
    );
    assert_eq!(listed_ranks(&dump, "failures", "rank"), [2, 3], "{dump:#}");
    for f in dump["failures"].as_array().expect("failures") {
        let message = f["message"].as_str().expect("message");
        assert!(
            message.contains(&format!("(pid {mpiexec}) on this host"))
                && message.contains("mqs-dump --pid <the pid of hydra_pmi_proxy on that host>"),
            "{message}"
        );
    }
    assert!(!out.status.success(), "ranks not read: not a success");
    let text = stdout(&timed(&["--pid", &mpiexec]).0);
    assert!(
        text.contains("rank 2 (") && text.contains("not dumped"),
        "{text}"
    );

    // As it says: the proxy in the node, by its pid there.
    let node_ranks: Vec<u32> = mqs_tests::processes_with_env(JOB_ENV, job.id())
        .into_iter()
        .filter(|r| r.pid != job.launcher_pid())
        .filter(|r| {
            std::fs::read_link(format!("/proc/{}/ns/pid", r.pid)).ok()
                != std::fs::read_link("/proc/self/ns/pid").ok()
        })
        .map(|r| r.pid)
        .collect();
    let proxy = node_ranks
        .iter()
        .filter_map(|&pid| mqs_tests::parent_pid(pid))
        .find(|&p| {
            mqs_tests::process_cmdline(p)
                .is_some_and(|c| c.first().is_some_and(|a| a.ends_with("hydra_pmi_proxy")))
        })
        .expect("hydra's proxy in the node");
    let local = mqs_tests::namespace_processes(proxy)
        .expect("the node's processes")
        .into_iter()
        .find(|&(ours, _)| ours == proxy)
        .map(|(_, theirs)| theirs)
        .expect("the proxy's pid in the node");
    let out = nodes
        .command_in("nodeh", mqs_dump())
        .expect("nsenter")
        .args(["--pid", &local.to_string(), "--json"])
        .stdin(Stdio::null())
        .output()
        .expect("mqs-dump in the node");
    let there = json(&out);
    assert_eq!(
        listed_ranks(&there, "processes", "global_rank"),
        [2, 3],
        "{there:#}"
    );
    // And from there, this host's ranks are the ones not seen.
    assert_eq!(
        listed_ranks(&there, "failures", "rank"),
        [0, 1],
        "{there:#}"
    );
    job.shutdown().expect("shutdown");
}

/// The ranks `dump`'s list `list` gives, each by its field `field`.
fn listed_ranks(dump: &Value, list: &str, field: &str) -> Vec<i64> {
    dump[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list}: {dump:#}"))
        .iter()
        .map(|p| p[field].as_i64().expect("a rank"))
        .collect()
}
