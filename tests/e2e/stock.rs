//! The MPIs users actually have: Debian 12's stock binary packages, which
//! carry no DWARF (installed by `scripts/setup-mpis`).
//!
//! - Open MPI 4.1.4-3+b1: a hung `queues` job (compiled with the stock
//!   `mpicc.openmpi`) is dumped with Open MPI's own DLL and with ours
//!   through the committed type packs (`typepacks/`), and shows the same
//!   queue contents as the `-g` build of the same version; without packs and
//!   without debuginfod the error names the library, its build-id and the
//!   three fixes (exit 6); a pack with one field offset altered is refused
//!   by the runtime invariants.
//! - The same job with the packs removed and `DEBUGINFOD_URLS` pointing at a
//!   local `debuginfod` serving the debug files works too.
//! - The same Open MPI under `pml ucx` on Debian's stock UCX (`libucx0`
//!   1.13.1-1): the `queues` and `mprobe` jobs show, through the packs
//!   alone (libmpi's, `mca_pml_ucx.so`'s and `libucp.so.0`'s), exactly the
//!   queues of the `-g` build (`openmpi-4.1.4-ucx` on UCX 1.13.1 `-g`) under
//!   pml ucx; Open MPI's own DLL lists nothing on either, as on the `-g`
//!   build. Without UCX's pack our DLL says, per queue, that UCX cannot be
//!   read and which type is missing.
//! - MPICH 4.0.2-3+b1 (ch4:ucx, no `--enable-debuginfo`): through the
//!   packs of `libmpich.so.12` and `libucp.so.0`, our DLL lists the
//!   `queues` job's posted receives and unexpected messages exactly (the
//!   communicators found among MPICH's communicator objects, the queues
//!   from UCX's worker: Debian's build sends every message through UCX,
//!   on one node too), and says sends are not
//!   known; the `mprobe` job's persistent receive, `MPI_Mprobe`'d message
//!   and `MPI_Issend`'s unexpected rendezvous message too; without the MPICH pack, one line saying why no queues can be
//!   shown (exit 6); `mqs-dump cvars` still lists its control variables.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mqs_tests::{workspace_root, Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::stock::*;
use support::*;

/// The build-id of Debian 12's libmpi.so.40.30.4 (4.1.4-3+b1, amd64).
const STOCK_LIBMPI_ID: &str = "2a2f4d8c4f8dc5dcc63f6789a50f3ab49f61e168";
/// The build-id of the dwz file of the rebuild's libopenmpi3-dbgsym
/// (tests/data/debuginfod/libopenmpi3.debug.dwz.xz).
const DWZ_ID: &str = "95201074ad010e03ad93bb81e1383e8ea9982bac";
const NO_DEBUG_INFO: i32 = 6;

#[test]
fn stock_open_mpi_is_dumped_with_both_dlls_like_the_g_build() {
    let reference = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch on -g");
    let empty = scratch("cache-g");
    let env = isolated(&empty, &empty, None);
    let expected = dumps(&reference, &env, None);
    reference.shutdown().expect("shutdown");

    let job = Job::launch(Mpi::DebianOpenMpi, "queues", 2, &[]).expect("launch on stock");
    let cache = scratch("cache-stock");
    // The committed packs, through the installed data directory.
    let data = data_with_packs("packs", |_| {});
    let env = isolated(&data, &cache, None);
    let got = dumps(&job, &env, None);
    for ((rank, their_g, our_g, read_g), (_, their_stock, our_stock, unread)) in
        expected.iter().zip(&got)
    {
        assert_eq!(
            their_stock, their_g,
            "rank {rank}: Open MPI's DLL, stock vs -g"
        );
        assert_eq!(our_stock, our_g, "rank {rank}: our DLL, stock vs -g");
        // Vader is read on both: the packs have its types.
        assert_eq!(*read_g, 0, "rank {rank}: the -g build's vader read");
        assert_eq!(
            *unread, 0,
            "rank {rank}: stock: vader read through the packs"
        );
        if *rank == 0 {
            let unexpected: Vec<&String> = our_stock
                .iter()
                .filter(|l| l.starts_with("  unexpected: \"pending\""))
                .collect();
            assert_eq!(
                unexpected.len(),
                2,
                "ours lists both unexpected messages: {our_stock:#?}"
            );
            assert!(
                their_stock
                    .iter()
                    .any(|l| l.contains("unexpected: \"not_available\"")),
                "{their_stock:#?}"
            );
        }
    }

    // The same packs given with --typepack instead.
    let pid = job.rank_pid(0).unwrap().to_string();
    let empty_env = isolated(&scratch("none"), &cache, None);
    let packs = data.join("typepacks").display().to_string();
    let out = run_with(
        &["--pid", &pid, "--typepack", &packs, "--dll", &our_dll()],
        &empty_env,
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // No pack, no debuginfod: the library, its build-id, the three fixes.
    let out = run_with(&["--pid", &pid], &empty_env);
    assert_error(
        &out,
        NO_DEBUG_INFO,
        &[
            "libmpi.so.40",
            STOCK_LIBMPI_ID,
            "-dbgsym",
            "--typepack",
            "DEBUGINFOD_URLS",
            "mqs-dump typepack extract",
        ],
    );
    let out = run_with(
        &["--pid", &pid, "--dll", &our_dll(), "--offline"],
        &empty_env,
    );
    assert_error(&out, NO_DEBUG_INFO, &[STOCK_LIBMPI_ID, "--offline"]);
    assert_running_untraced(job.rank_pid(0).unwrap());
    job.shutdown().expect("shutdown");
}

/// One dump of one rank, in JSON.
fn dumped(pid: u32, extra: &[&str], env: &[(String, String)]) -> Value {
    let pid_s = pid.to_string();
    let mut args = vec!["--pid", pid_s.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = run_with(&args, env);
    assert!(out.status.success(), "mqs-dump {args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `fixture` on `mpi` under pml ucx on one machine (UCX's loopback and
/// shared-memory transports).
fn launch_pml_ucx(mpi: Mpi, fixture: &str) -> Job {
    let options = LaunchOptions::pml_ucx();
    Job::launch_with(mpi, fixture, 2, &[], &options)
        .unwrap_or_else(|e| panic!("launch {fixture} on {mpi} under pml ucx: {e}"))
}

/// Each rank's queues under pml ucx through Open MPI's own DLL and ours,
/// once the rank waits in its blocking receive on `comm`; and what our DLL
/// says it read (`Open MPI 4.1.4, pml ucx, UCX 1.13.1`).
fn ucx_dumps(job: &Job, comm: &str, env: &[(String, String)]) -> Vec<UcxRank> {
    let ours = our_dll();
    job.rank_pids()
        .into_iter()
        .map(|(rank, pid)| {
            let mine = settled_on(comm, pid, &["--dll", &ours], env, None);
            // Settled now; Open MPI's DLL shows no receive to wait for.
            let theirs = dumped(pid, &["--dll", "mpi"], env);
            assert_running_untraced(pid);
            UcxRank {
                rank,
                theirs: contents(&theirs),
                ours: contents(&mine),
                version: mine["processes"][0]["dll"]["mpi"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            }
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq)]
struct UcxRank {
    rank: u32,
    theirs: Vec<String>,
    ours: Vec<String>,
    version: String,
}

/// How many operations a listing from [`contents`] has.
fn operations(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| {
            ["  sends: ", "  receives: ", "  unexpected: "]
                .iter()
                .any(|q| l.starts_with(q) && !l[q.len()..].starts_with("\"not_available\""))
        })
        .count()
}

/// Debian 12's stock Open MPI under `pml ucx` on Debian's stock UCX, every
/// library stripped: the packs of libmpi, `mca_pml_ucx.so` and
/// `libucp.so.0` alone let our DLL read UCX's worker, and each rank's
/// queues are exactly the `-g` build's under pml ucx: a specific and an
/// ANY_SOURCE receive, an ANY_TAG receive on a dup'd communicator, the
/// unexpected eager message and the unexpected 400,000-byte rendezvous
/// one, the blocking `MPI_Recv` (`queues`); a persistent receive, a
/// message `MPI_Mprobe` took and the `MPI_Issend`'s rendezvous message
/// (`mprobe`). Open MPI's own DLL lists nothing on either build.
#[test]
fn stock_open_mpi_under_pml_ucx_on_stock_ucx_is_dumped_through_the_packs_like_the_g_build() {
    for (fixture, comm) in [("queues", "mqs-wait"), ("mprobe", "MPI_COMM_WORLD")] {
        let reference = launch_pml_ucx(Mpi::OpenMpiUcx, fixture);
        let empty = scratch(&format!("ucx-g-{fixture}"));
        let expected = ucx_dumps(&reference, comm, &isolated(&empty, &empty, None));
        reference.shutdown().expect("shutdown");

        let job = launch_pml_ucx(Mpi::DebianOpenMpi, fixture);
        let cache = scratch(&format!("ucx-stock-cache-{fixture}"));
        let data = data_with_packs(&format!("ucx-packs-{fixture}"), |_| {});
        let got = ucx_dumps(&job, comm, &isolated(&data, &cache, None));
        let pid = job.rank_pid(0).unwrap().to_string();
        // A libucp pack with the unexpected list a word off is refused
        // before any DLL reads through it (the worker's ring is checked).
        let shifted = data_with_packs(&format!("ucx-shifted-{fixture}"), |p| {
            shift_field(p, "ucp_tag_match_t", "unexpected.all", 8)
        });
        let out = run_with(
            &["--pid", &pid, "--dll", &our_dll()],
            &isolated(&shifted, &cache, None),
        );
        assert_error(
            &out,
            NO_DEBUG_INFO,
            &[
                "refused",
                "libucp.so.0",
                "unexpected.all",
                "does not link back",
            ],
        );
        // With Open MPI's packs but not UCX's: every queue UCX holds says
        // why it cannot be read, never an empty list.
        let open_mpi_only = data_with_packs(&format!("ucx-ompi-only-{fixture}"), |_| {});
        std::fs::remove_file(open_mpi_only.join("typepacks/debian12-ucx-1.13.1-1-libucp.json"))
            .expect("the libucp pack is committed");
        let out = run_with(
            &["--pid", &pid, "--dll", &our_dll(), "--json"],
            &isolated(&open_mpi_only, &cache, None),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let partial: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        for c in partial["processes"][0]["communicators"]["list"]
            .as_array()
            .expect("communicators")
        {
            for q in ["receives", "unexpected"] {
                let reason = c[q]["reason"].as_str().unwrap_or_default();
                assert!(
                    c[q]["status"] == "not_available"
                        && reason.contains("UCX cannot be read here")
                        && reason.contains("type ucp_worker_t missing")
                        && reason.contains("libucp.so.0 has no debug information"),
                    "{fixture}: without libucp's pack, {} {q}: {}",
                    c["name"],
                    c[q]
                );
            }
        }
        // Without the packs no DLL has the types: the libraries are named.
        let none = scratch(&format!("ucx-none-{fixture}"));
        let out = run_with(
            &["--pid", &pid, "--dll", &our_dll(), "--offline"],
            &isolated(&none, &cache, None),
        );
        assert_error(&out, NO_DEBUG_INFO, &[STOCK_LIBMPI_ID, "--offline"]);
        job.shutdown().expect("shutdown");

        assert_eq!(got.len(), 2, "{fixture}: {got:#?}");
        for (g, stock) in expected.iter().zip(&got) {
            let rank = g.rank;
            assert!(
                g.version.contains("pml ucx, UCX 1.13.1"),
                "{fixture} rank {rank}: -g: {}",
                g.version
            );
            assert_eq!(
                stock.version, g.version,
                "{fixture} rank {rank}: the version line, stock vs -g"
            );
            assert_eq!(
                stock.ours, g.ours,
                "{fixture} rank {rank}: our DLL under pml ucx, stock vs -g"
            );
            assert_eq!(
                stock.theirs, g.theirs,
                "{fixture} rank {rank}: Open MPI's DLL under pml ucx, stock vs -g"
            );
            // Open MPI's DLL walks ob1's request lists, which pml ucx never
            // fills: nothing, on either build.
            assert_eq!(
                operations(&stock.theirs),
                0,
                "{fixture} rank {rank}: Open MPI's DLL: {:#?}",
                stock.theirs
            );
        }
        // What each fixture leaves is there (not two empty listings).
        let rank0 = &got[0].ours;
        let has = |needle: &str| rank0.iter().filter(|l| l.contains(needle)).count();
        match fixture {
            "queues" => {
                assert_eq!(
                    has("unexpected: \"pending\""),
                    2,
                    "eager and rendezvous: {rank0:#?}"
                );
                assert!(has("tag 1000") >= 1, "{rank0:#?}");
                assert!(has("len 400000") >= 1, "{rank0:#?}");
            }
            _ => {
                assert_eq!(has("message taken by MPI_Mprobe"), 1, "{rank0:#?}");
                assert_eq!(has("persistent receive request ADDR"), 1, "{rank0:#?}");
                assert_eq!(has("len 400000"), 1, "{rank0:#?}");
            }
        }
    }
}

#[test]
fn a_pack_with_an_altered_field_offset_is_refused() {
    let job = Job::launch(Mpi::DebianOpenMpi, "queues", 2, &[]).expect("launch on stock");
    let pid = job.rank_pid(1).unwrap();
    let cache = scratch("cache-altered");
    let cases: [(&str, &str, i64, &[&str]); 3] = [
        (
            "ompi_communicator_t",
            "c_name",
            8,
            &["c_name", "MPI_COMM_WORLD"],
        ),
        (
            "ompi_group_t",
            "grp_proc_count",
            4,
            &["grp_proc_count", "the job 2"],
        ),
        (
            "mca_pml_ob1_comm_t",
            "num_procs",
            8,
            &["mca_pml_ob1", "num_procs"],
        ),
    ];
    for (ty, field, by, needles) in cases {
        let data = data_with_packs(field, |p| shift_field(p, ty, field, by));
        let env = isolated(&data, &cache, None);
        // The packs are checked before any DLL reads through them: the
        // MPI's own, ours, and the default choice refuse alike.
        for dll in [Some("mpi".to_string()), Some(our_dll()), None] {
            let pid_s = pid.to_string();
            let mut args = vec!["--pid", pid_s.as_str()];
            if let Some(d) = &dll {
                args.extend(["--dll", d.as_str()]);
            }
            let out = run_with(&args, &env);
            let mut all = vec!["refused", "typepacks/"];
            all.extend_from_slice(needles);
            assert_error(&out, NO_DEBUG_INFO, &all);
        }
    }
    // Unaltered, the same rank dumps.
    let data = data_with_packs("unaltered", |_| {});
    let out = run_with(&["--pid", &pid.to_string()], &isolated(&data, &cache, None));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_running_untraced(pid);
    job.shutdown().expect("shutdown");
}

/// A debuginfod server serving `dir` on the loopback address of a network
/// namespace of its own (Debian 12's debuginfod cannot be told which
/// address to listen on: this way it listens on nothing else), stopped when
/// dropped. mqs-dump joins the namespace to reach it.
struct Debuginfod {
    child: Child,
    url: String,
    netns: String,
}

impl Debuginfod {
    fn start(dir: &Path, scratch: &Path) -> Self {
        let exe = Path::new("/usr/bin/debuginfod");
        assert!(
            exe.is_file(),
            "{} is missing: scripts/setup-mpis installs Debian's debuginfod package",
            exe.display()
        );
        let db = scratch.join("debuginfod.sqlite");
        let log = std::fs::File::create(scratch.join("debuginfod.log")).unwrap();
        let child = Command::new("unshare")
            .args([
                "--net",
                "sh",
                "-c",
                "ip link set lo up && exec \"$0\" \"$@\"",
            ])
            .arg(exe)
            .args(["-F", "-d"])
            .arg(&db)
            .args(["-p", "8002", "-t", "0", "-g", "0", "-c", "1", "-v"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start debuginfod in a network namespace (unshare, ip)");
        let netns = format!("/proc/{}/ns/net", child.id());
        let server = Self {
            child,
            url: "http://127.0.0.1:8002".into(),
            netns,
        };
        server.wait_until_indexed(scratch);
        server
    }

    /// Until the scan has indexed the debug files: the stock libmpi's is
    /// served (GET: this debuginfod answers HEAD with 400).
    fn wait_until_indexed(&self, scratch: &Path) {
        let deadline = Instant::now() + Duration::from_secs(180);
        let probe = format!("{}/buildid/{STOCK_LIBMPI_ID}/debuginfo", self.url);
        let script = "import sys, urllib.request, urllib.error\n\
try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)\n\
except urllib.error.HTTPError as e:\n    print(e.code)\n\
except Exception as e:\n    print(e)\n";
        loop {
            let status = Command::new("nsenter")
                .arg(format!("--net={}", self.netns))
                .args(["--", "/usr/bin/python3", "-c", script, &probe])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default();
            if status == "200" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "debuginfod did not serve {probe} within 180 s (last answer {status}); log: {}",
                std::fs::read_to_string(scratch.join("debuginfod.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

/// The debug files of Debian's libopenmpi3 4.1.4-3+b1 that the tests
/// serve (see tests/data/debuginfod/README.md).
fn debug_files() -> PathBuf {
    workspace_root().join("tests/data/debuginfod")
}

#[test]
fn stock_open_mpi_without_packs_fetches_debug_files_from_debuginfod() {
    let scratch_dir = scratch("debuginfod");
    let served = scratch_dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    // debuginfod indexes files; the committed ones are compressed.
    for entry in std::fs::read_dir(debug_files()).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(".xz") {
            let out = std::fs::File::create(served.join(stem)).unwrap();
            let status = Command::new("xz")
                .args(["-dc"])
                .arg(&path)
                .stdout(out)
                .status()
                .expect("xz");
            assert!(status.success(), "xz -d {}", path.display());
        }
    }
    let server = Debuginfod::start(&served, &scratch_dir);

    let job = Job::launch(Mpi::DebianOpenMpi, "queues", 2, &[]).expect("launch on stock");
    let reference = Job::launch(Mpi::OpenMpiG, "queues", 2, &[]).expect("launch on -g");
    let none = scratch("nopacks");
    let expected = dumps(&reference, &isolated(&none, &none, None), None);
    reference.shutdown().expect("shutdown");

    let cache = scratch_dir.join("cache");
    let env = isolated(&none, &cache, Some(&server.url));
    let got = dumps(&job, &env, Some(&server.netns));
    // The served debug files are libmpi's, ob1's and vader's: the
    // transport is read too.
    for ((rank, their_g, our_g, _), (_, theirs, ours, unread)) in expected.iter().zip(&got) {
        assert_eq!(*unread, 0, "rank {rank}: vader read through debuginfod");
        assert_eq!(
            theirs, their_g,
            "rank {rank}: Open MPI's DLL, debuginfod vs -g"
        );
        assert_eq!(ours, our_g, "rank {rank}: our DLL, debuginfod vs -g");
    }
    // Cached by build-id, and only the MPI's files: a debug file and the
    // dwz file it names, fetched by the dwz file's own build-id. (ob1's
    // debug file, with the dwz file, also has libmpi's types: whichever is
    // fetched first can answer for both.)
    let cached: Vec<String> = std::fs::read_dir(cache.join("debuginfod"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let served: Vec<String> = std::fs::read_dir(debug_files())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.split('.')
                .find(|part| part.len() == 40)
                .map(str::to_owned)
        })
        .collect();
    assert!(cached.contains(&DWZ_ID.to_owned()), "{cached:?}");
    assert!(
        cached.len() >= 2,
        "a debug file and the dwz file: {cached:?}"
    );
    for id in &cached {
        assert!(
            served.contains(id) || id == DWZ_ID,
            "{id} is not one of the served files {served:?}"
        );
        assert!(cache
            .join("debuginfod")
            .join(id)
            .join("debuginfo")
            .is_file());
    }

    ring_arguments_from_fetched_debug_files(&server, &scratch_dir);

    // --offline never asks; with the cache removed that leaves nothing.
    std::fs::remove_dir_all(cache.join("debuginfod")).unwrap();
    let pid = job.rank_pid(0).unwrap().to_string();
    let out = run_in(Some(&server.netns), &["--pid", &pid, "--offline"], &env);
    assert_error(&out, NO_DEBUG_INFO, &[STOCK_LIBMPI_ID, "--offline"]);
    assert!(
        !cache.join("debuginfod").exists(),
        "--offline fetched nothing"
    );
    drop(server);
    // A server that is not there: the error says what was asked.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let env = isolated(&none, &cache, Some(&nobody));
    let out = run_with(&["--pid", &pid], &env);
    assert_error(
        &out,
        NO_DEBUG_INFO,
        &[STOCK_LIBMPI_ID, "debuginfod", &nobody],
    );
    job.shutdown().expect("shutdown");
}

/// The arguments of each rank's blocking `MPI_Recv` in a stock Open MPI
/// ring deadlock, as `--stacks` reads them for waits from the stacks: the
/// committed packs answer every type the DLL asks, but packs hold no
/// parameter locations, so libmpi's debug file is fetched from debuginfod
/// for them. Open MPI's `MPI_Recv` keeps only `count` where it waits
/// (`source` and `tag` are entry values there, which an -O0 caller gives
/// no call-site values for), so `count` is what shows they were read.
/// `--offline` reads the same queues and stacks without the arguments, and
/// the cycle is found either way.
fn ring_arguments_from_fetched_debug_files(server: &Debuginfod, scratch_dir: &Path) {
    const RANKS: usize = 4;
    let job = Job::launch(Mpi::DebianOpenMpi, "split_ring", RANKS as u32, &[])
        .expect("launch split_ring on stock");
    let cache = scratch_dir.join("ring-cache");
    let env = isolated(&workspace_root(), &cache, Some(&server.url));
    let pid = job.launcher_pid().to_string();
    // The arguments of each rank's MPI_Recv, once every rank is in it.
    let recv_arguments = |json: &Value| -> Vec<Option<Vec<(String, i64)>>> {
        let processes = json["processes"].as_array().cloned().unwrap_or_default();
        let mut by_rank = vec![None; RANKS];
        for p in &processes {
            let rank = p["global_rank"].as_u64().unwrap_or(u64::MAX) as usize;
            let frames = p["stacks"]["list"]
                .as_array()
                .and_then(|threads| {
                    threads
                        .iter()
                        .find(|t| t["tid"] == p["pid"])
                        .and_then(|t| t["frames"].as_array())
                })
                .cloned()
                .unwrap_or_default();
            let call = frames
                .iter()
                .find(|f| f["function"] == "MPI_Recv")
                .map(|f| f["call"].clone());
            if let (Some(call), Some(slot)) = (call, by_rank.get_mut(rank)) {
                let ints = call["ints"].as_array().cloned().unwrap_or_default();
                *slot = Some(
                    ints.iter()
                        .filter_map(|pair| Some((pair[0].as_str()?.to_owned(), pair[1].as_i64()?)))
                        .collect(),
                );
            }
        }
        by_rank
    };
    let in_recv = |args: &[&str]| -> Vec<Option<Vec<(String, i64)>>> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = run_in(Some(&server.netns), args, &env);
            assert!(out.status.success(), "mqs-dump {args:?}: {}", stderr(&out));
            let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            let got = recv_arguments(&json);
            if got.iter().all(Option::is_some) || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    // Every rank receives 1 int.
    let expected = vec![Some(vec![("count".to_owned(), 1)]); RANKS];
    let got = in_recv(&["--pid", &pid, "--json", "--stacks"]);
    assert_eq!(got, expected, "the arguments of each rank's MPI_Recv");
    assert!(
        cache
            .join("debuginfod")
            .join(STOCK_LIBMPI_ID)
            .join("debuginfo")
            .is_file(),
        "libmpi's debug file was fetched for them"
    );
    // The waits from the stacks and the queues agree: one cycle, no
    // disagreement.
    let out = run_in(Some(&server.netns), &["--pid", &pid, "--deadlock"], &env);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(12), "{text}\n{}", stderr(&out));
    assert!(
        text.contains(&format!("deadlocked: ranks 0-{} in 1 cycle", RANKS - 1)),
        "{text}"
    );
    assert!(!text.contains("disagree"), "{text}");
    // Offline, nothing fetched: the stacks have no arguments.
    std::fs::remove_dir_all(cache.join("debuginfod")).unwrap();
    let out = run_in(
        Some(&server.netns),
        &["--pid", &pid, "--json", "--stacks", "--offline"],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        recv_arguments(&json),
        vec![Some(Vec::new()); RANKS],
        "no arguments offline"
    );
    assert!(
        !cache.join("debuginfod").exists(),
        "--offline fetched nothing"
    );
    job.shutdown().expect("shutdown");
}

/// A data directory with the committed packs but MPICH's: stock MPICH as
/// it is without one.
fn data_without_mpich_pack(tag: &str) -> PathBuf {
    let data = data_with_packs(tag, |_| {});
    for entry in std::fs::read_dir(data.join("typepacks")).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("debian12-mpich-"))
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    data
}

#[test]
fn stock_mpich_says_why_it_has_no_queues_and_lists_its_cvars() {
    let data = data_without_mpich_pack("mpich-nopack");
    let env = isolated(&data, &data.join("cache"), None);
    let job = Job::launch(Mpi::DebianMpich, "queues", 2, &[]).expect("launch on stock MPICH");
    for (_, pid) in job.rank_pids() {
        let out = run_with(&["--pid", &pid.to_string()], &env);
        assert_error(
            &out,
            NO_DEBUG_INFO,
            &[
                "MPICH",
                "--enable-debuginfo",
                "libmpich.so.12",
                "--stacks still shows",
            ],
        );
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");

    // MPI_T does not need the debugger support. (Debian puts both MPIs in
    // /usr, where `--mpi /usr` names the libmpi.so alternative, Open MPI:
    // MPICH's library is given by name.)
    let out = run(&[
        "cvars",
        "--lib",
        "/usr/lib/x86_64-linux-gnu/libmpich.so.12",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listing["library"].as_str().unwrap().contains("mpich"),
        "{}",
        listing["library"]
    );
    assert!(
        listing["num_cvars"].as_u64().unwrap() > 100,
        "{}",
        listing["num_cvars"]
    );
}

/// Debian's own MPICH (built without debugger support, stripped, offline:
/// no debug files) in a ring deadlock: no DLL can read its queues and the
/// stacks give no arguments. With `--stacks`, each rank is still dumped
/// (its stacks, its queues not available and why), and `--deadlock`
/// cannot judge any rank: it says so, naming the ranks and why, and exits
/// 17, never "no deadlock". (Debian's hydra keeps no MPIR table: the
/// ranks are named by pid.)
#[test]
fn a_ring_on_stock_mpich_without_debug_info_is_cannot_tell() {
    let data = data_without_mpich_pack("mpich-ring");
    let env = isolated(&data, &data.join("cache"), None);
    let run = |args: &[&str]| run_with(args, &env);
    let job = Job::launch(Mpi::DebianMpich, "split_ring", 8, &[]).expect("launch on stock MPICH");
    let pids: Vec<String> = job.rank_pids().iter().map(|(_, p)| p.to_string()).collect();
    let mut args: Vec<&str> = pids.iter().flat_map(|p| ["--pid", p.as_str()]).collect();
    args.extend(["--stacks", "--deadlock", "--offline"]);
    // Once every rank is in its MPI_Recv, the job stays as it is.
    let started = Instant::now();
    let out = loop {
        let out = run(&args);
        let text = stdout(&out);
        if text.contains("cannot tell: ranks 0-7 not judged")
            || started.elapsed() > Duration::from_secs(90)
        {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(17), "{text}\n{}", stderr(&out));
    assert!(!text.contains("no deadlock"), "{text}");
    assert!(text.contains("cannot tell: ranks 0-7 not judged"), "{text}");
    // Why: no queues for debuggers in Debian's libmpich, and no arguments
    // in the stacks.
    let why = text
        .lines()
        .find(|l| l.starts_with("not judged: ranks 0-7 ("))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        why.contains("communicators not available")
            && why.contains("libmpich.so.12")
            && why.contains("--enable-debuginfo"),
        "{why}"
    );
    assert!(why.contains("MPI_Recv"), "{why}");
    // The job view says the same, with the ranks' stacks.
    let mut view: Vec<&str> = pids.iter().flat_map(|p| ["--pid", p.as_str()]).collect();
    view.extend(["--stacks", "--offline"]);
    let out = run(&view);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("who waits for whom: cannot tell for ranks 0-7"),
        "{text}"
    );
    assert!(text.contains("MPI_Recv"), "{text}");
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

/// One listed operation of a stock MPICH dump: status, peer (in the
/// communicator, and global), tag (None: ANY_TAG) and length in bytes.
type MpichRow = (String, i64, i64, Option<i64>, i64);

fn mpich_pending(peer: i64, global: i64, tag: Option<i64>, length: i64) -> MpichRow {
    ("pending".to_string(), peer, global, tag, length)
}

/// (global rank, communicator, queue) -> the rows listed, or Err(why) for
/// a queue not available.
fn mpich_queues(
    dump: &Value,
) -> std::collections::BTreeMap<(i64, String, &'static str), Result<Vec<MpichRow>, String>> {
    let mut out = std::collections::BTreeMap::new();
    for p in dump["processes"].as_array().expect("processes") {
        let rank = p["global_rank"].as_i64().expect("global rank");
        for c in p["communicators"]["list"]
            .as_array()
            .expect("communicators")
        {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            for queue in ["sends", "receives", "unexpected"] {
                let section = &c[queue];
                let listed = match section["status"].as_str() {
                    Some("ok") => Ok(section["operations"]
                        .as_array()
                        .expect("operations")
                        .iter()
                        .map(|op| {
                            (
                                op["status"].as_str().unwrap_or_default().to_string(),
                                op["desired_local_rank"].as_i64().unwrap(),
                                op["desired_global_rank"].as_i64().unwrap(),
                                op["desired_tag"].as_i64(),
                                op["desired_length"].as_i64().unwrap(),
                            )
                        })
                        .collect()),
                    _ => Err(section["reason"].as_str().unwrap_or_default().to_string()),
                };
                out.insert((rank, name.clone(), queue), listed);
            }
        }
    }
    out
}

/// Debian's own MPICH (ch4:ucx, no debugger support, stripped) running
/// the `queues` fixture on one node, dumped with our DLL through the
/// committed packs (libmpich.so.12's and libucp.so.0's) alone: the
/// communicators are found among MPICH's communicator objects, and every
/// posted receive and unexpected message of the fixture is listed exactly,
/// the sends not available, saying why. Debian's MPICH is built with
/// `MPIDI_CH4_DIRECT_NETMOD` (no shared-memory module in use): on one node
/// too, every message goes through UCX, so every operation listed is read
/// from UCX's worker (its matching order, its descriptors) through
/// libucp's pack.
#[test]
fn stock_mpich_queues_through_the_packs_are_exact() {
    let dump = stock_mpich_queues_job();
    let ops = receives_and_unexpected(&dump);
    assert_eq!(ops.len(), 8, "{dump:#}");
    for op in ops {
        assert!(
            op.contains("in UCX 1.13.1 matching order") || op.contains("UCX 1.13.1 descriptor"),
            "{op}\n{dump:#}"
        );
    }
}

/// Every receive's and unexpected message's `extra_text`, as JSON text.
fn receives_and_unexpected(dump: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in dump["processes"].as_array().expect("processes") {
        for c in p["communicators"]["list"]
            .as_array()
            .expect("communicators")
        {
            for queue in ["receives", "unexpected"] {
                for op in c[queue]["operations"].as_array().into_iter().flatten() {
                    out.push(op["extra_text"].to_string());
                }
            }
        }
    }
    out
}

/// `fixture` on stock MPICH (2 ranks) dumped with our DLL through the
/// committed packs (in a scratch data directory named by `tag`), once
/// both ranks list their blocking receive (tag 1000) on `comm`.
fn settled_stock_mpich(tag: &str, fixture: &str, comm: &str) -> (Job, Value) {
    let data = data_with_packs(tag, |_| {});
    let env = isolated(&data, &data.join("cache"), None);
    let job = Job::launch(Mpi::DebianMpich, fixture, 2, &[]).expect("launch on stock MPICH");
    let pids: Vec<String> = job.rank_pids().iter().map(|(_, p)| p.to_string()).collect();
    let dll = our_dll();
    let mut args: Vec<&str> = pids.iter().flat_map(|p| ["--pid", p.as_str()]).collect();
    args.extend(["--json", "--dll", dll.as_str()]);
    let started = Instant::now();
    loop {
        let out = run_with(&args, &env);
        assert!(out.status.success(), "{}", stderr(&out));
        let dump: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let q = mpich_queues(&dump);
        let waiting = (0..2).all(|r| {
            matches!(q.get(&(r, comm.to_string(), "receives")),
                     Some(Ok(rows)) if rows.iter().any(|row| row.3 == Some(1000)))
        });
        if waiting {
            return (job, dump);
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "never settled: {dump:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `mqs-dump --pid <mpiexec>` on stock MPICH with no DLL named, as a user
/// would type it: Debian's hydra keeps no process table, so the ranks are
/// found below it (through its proxy), and our DLL reads them by default
/// through the packs although the MPI names no DLL. The same queues as by
/// the ranks' pids, and the text says how the DLL was chosen.
#[test]
fn stock_mpich_by_its_mpiexec_with_the_default_dll() {
    let (job, by_ranks) = settled_stock_mpich("mpich-mpiexec", "queues", "mqs-wait");
    let data = data_with_packs("mpich-mpiexec-2", |_| {});
    let env = isolated(&data, &data.join("cache"), None);
    let launcher = job.launcher_pid().to_string();
    let out = run_with(&["--pid", &launcher, "--json"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let by_launcher: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        mpich_queues(&by_launcher),
        mpich_queues(&by_ranks),
        "{by_launcher:#}"
    );
    let out = run_with(&["--pid", &launcher], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "job of mpiexec.hydra (pid {launcher}): 2 ranks (0-1),"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "DLL: mqs's own (the default; this MPICH, built without debugger support, names no DLL"
        ),
        "{text}"
    );
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

/// The `mprobe` job on stock MPICH through the packs: rank 0's persistent
/// receive, its blocking `MPI_Recv`, the message `MPI_Mprobe` took (held
/// by an MPICH request, found among MPICH's request objects), and the
/// 400,000-byte message of rank 1's `MPI_Issend` waiting unexpected
/// (rendezvous): exactly as on the `-g` ch4:ucx build
/// (`persistent_mprobe_and_issend_under_mpich_ch4_ucx` in ucx.rs), but for
/// the Issend itself, which MPICH without debugger support keeps in no
/// send queue: sends are "not available", saying why.
#[test]
fn stock_mpich_persistent_mprobe_and_issend_through_the_packs_are_exact() {
    let (job, dump) = settled_stock_mpich("mpich-packs-mprobe", "mprobe", "MPI_COMM_WORLD");
    let got = mpich_queues(&dump);
    let world = |rank: i64, queue: &'static str| got.get(&(rank, "MPI_COMM_WORLD".into(), queue));
    let mprobed = ("complete".to_string(), 1, 1, Some(77), 16);
    assert_eq!(
        world(0, "receives"),
        Some(&Ok(vec![
            mpich_pending(1, 1, Some(78), 8),
            mpich_pending(-1, -1, Some(1000), 4),
            mprobed
        ])),
        "{dump:#}"
    );
    assert_eq!(
        world(0, "unexpected"),
        Some(&Ok(vec![mpich_pending(1, 1, Some(79), 400_000)])),
        "{dump:#}"
    );
    assert_eq!(
        world(1, "receives"),
        Some(&Ok(vec![mpich_pending(-1, -1, Some(1000), 4)])),
        "{dump:#}"
    );
    assert_eq!(world(1, "unexpected"), Some(&Ok(vec![])), "{dump:#}");
    for rank in 0..2 {
        match world(rank, "sends") {
            Some(Err(why)) => assert!(why.contains("without debugger support"), "{why}"),
            other => panic!("rank {rank} sends: {other:?}\n{dump:#}"),
        }
    }
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
}

/// The `queues` job on stock MPICH dumped through the packs once every
/// rank waits on "mqs-wait"; every queue is checked against the fixture's
/// (exactly what it posted and sent), and the dump returned.
fn stock_mpich_queues_job() -> Value {
    let (job, dump) = settled_stock_mpich("mpich-packs", "queues", "mqs-wait");
    let text = dump.to_string();
    assert!(text.contains("MPICH 4.0.2, device ch4:ucx"), "{dump:#}");
    assert!(
        text.contains("communicators from MPICH's object pools"),
        "{dump:#}"
    );
    let want = std::collections::BTreeMap::from([
        (
            (0, "mqs-dup", "receives"),
            vec![mpich_pending(1, 1, Some(7), 16)],
        ),
        (
            (0, "MPI_COMM_WORLD", "receives"),
            vec![mpich_pending(-1, -1, Some(8), 32)],
        ),
        // World rank 1 is split rank 0.
        (
            (0, "mqs-split", "receives"),
            vec![mpich_pending(0, 1, None, 8)],
        ),
        (
            (0, "mqs-wait", "receives"),
            vec![mpich_pending(-1, -1, Some(1000), 4)],
        ),
        (
            (0, "MPI_COMM_WORLD", "unexpected"),
            vec![
                mpich_pending(1, 1, Some(99), 64),
                mpich_pending(1, 1, Some(5), 400_000),
            ],
        ),
        (
            (1, "mqs-dup", "receives"),
            vec![mpich_pending(0, 0, Some(11), 32)],
        ),
        (
            (1, "mqs-wait", "receives"),
            vec![mpich_pending(-1, -1, Some(1000), 4)],
        ),
    ]);
    let got = mpich_queues(&dump);
    let comms = [
        "MPI_COMM_SELF",
        "MPI_COMM_WORLD",
        "mqs-dup",
        "mqs-split",
        "mqs-wait",
    ];
    for rank in 0..2 {
        let mut names: Vec<&str> = got
            .keys()
            .filter(|k| k.0 == rank && k.2 == "receives")
            .map(|k| k.1.as_str())
            .collect();
        names.sort_unstable();
        assert_eq!(names, comms, "rank {rank}\n{dump:#}");
    }
    let mut errors = Vec::new();
    for ((rank, comm, queue), listed) in &got {
        let ok = match (*queue, listed) {
            ("sends", Err(why)) => why.contains("without debugger support"),
            ("sends", Ok(_)) => false,
            (_, Ok(rows)) => {
                *rows
                    == want
                        .get(&(*rank, comm.as_str(), *queue))
                        .cloned()
                        .unwrap_or_default()
            }
            (_, Err(_)) => false,
        };
        if !ok {
            errors.push(format!("rank {rank} {comm} {queue}: {listed:?}"));
        }
    }
    assert!(errors.is_empty(), "{}\n{dump:#}", errors.join("\n"));
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    job.shutdown().expect("shutdown");
    dump
}
