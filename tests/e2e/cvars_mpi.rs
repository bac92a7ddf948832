//! `mqs-dump cvars` against the real MPIs: every control variable agrees
//! with what the MPI's own tool prints (Open MPI's `ompi_info --all
//! --internal --parsable`, MPICH's `mpivars`); `--check` finds exactly the
//! deviations the README lists; a job started with a changed eager limit
//! shows it, and where it came from, through `--pid`, and the default
//! through `--mpi`; the constants of host/mqs-cvars/src/abi.rs are those of
//! each MPI's mpi.h.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::process::Command;

use mqs_cvars::abi::{Abi, DatatypeHandles, MpiTError, MPICH, OPEN_MPI};
use mqs_cvars::{Bind, Datatype, Scope, Verbosity};
use mqs_tests::{Job, LaunchOptions, Mpi};
use serde_json::Value;
use support::*;

/// `mqs-dump cvars --mpi PREFIX extra...`, which must succeed, as JSON.
fn listing(mpi: Mpi, extra: &[&str]) -> Value {
    let prefix = mpi.prefix().expect("MPI built");
    let prefix = prefix.display().to_string();
    let mut args = vec!["cvars", "--mpi", prefix.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Our environment without the MPIs' own variables, for the MPIs' tools
/// (mqs-dump clears the same ones for its helper).
fn clean(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if ["OMPI_MCA_", "MPICH_", "MPIR_CVAR_", "MPIR_PARAM_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// A value as the listing's JSON gives it, in the MPI tool's words: an
/// enumeration's item (or flags) by name, booleans as true/false.
fn our_text(v: &Value) -> Option<String> {
    if let Some(name) = v.get("value_name").and_then(Value::as_str) {
        return Some(name.to_owned());
    }
    match v.get("value")? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        other => Some(other.to_string()),
    }
}

/// Open MPI's name for the MCA type behind each MPI_T datatype.
fn mca_type(datatype: &str) -> &'static [&'static str] {
    match datatype {
        "MPI_INT" => &["int"],
        "MPI_UNSIGNED" => &["unsigned_int"],
        "MPI_UNSIGNED_LONG" => &["unsigned_long", "size_t"],
        "MPI_UNSIGNED_LONG_LONG" => &["unsigned_long_long"],
        "MPI_CHAR" => &["string", "version_string"],
        "MPI_C_BOOL" => &["bool"],
        "MPI_DOUBLE" => &["double"],
        "MPI_LONG" => &["long"],
        "MPI_INT32_T" => &["int32_t"],
        "MPI_UINT32_T" => &["uint32_t"],
        "MPI_INT64_T" => &["int64_t"],
        "MPI_UINT64_T" => &["uint64_t"],
        _ => &[],
    }
}

/// Variables MPI_T lists that `ompi_info --all --internal` does not print,
/// and why (each checked in Open MPI 4.1.4's source).
/// Variables whose storage Open MPI 4.1.4 registers on the stack of the
/// function that registers them (pml_ucx_component.c: a local `int
/// multi_send_op_attr_enable`): once it returns, any reader gets whatever
/// is on the stack there, so ompi_info and MPI_T need not agree.
const DANGLING_STORAGE: [&str; 1] = ["pml_ucx_multi_send_nb"];

const ONLY_IN_MPI_T: [(&str, &str); 13] = [
    (
        "async_mpi_init",
        "registered in group ompi_async_mpi, which is no framework ompi_info walks",
    ),
    ("async_mpi_finalize", "the same group as async_mpi_init"),
    (
        "dss_buffer_type",
        "registered in group opal_dss, which is no framework",
    ),
    (
        "dss_buffer_initial_size",
        "the same group as dss_buffer_type",
    ),
    (
        "dss_buffer_threshold_size",
        "the same group as dss_buffer_type",
    ),
    (
        "pmix_server_uri",
        "registered by schizo/ompi outside any framework group",
    ),
    (
        "pls_rsh_agent",
        "a deprecated synonym in group orte_pls_rsh; pls is no framework any more",
    ),
    (
        "btl_vader_atomic_flags",
        "its value has bit 0x1000000, which its flag enumeration names no item for: ompi_info \
         cannot print the value and leaves the variable out",
    ),
    // The -g build links UCX (it serves pml ucx too): opal's common UCX
    // code registers these in group opal_common_ucx, no framework.
    (
        "opal_common_ucx_tls",
        "registered by opal's common UCX code in group opal_common_ucx, which is no framework",
    ),
    (
        "opal_common_ucx_devices",
        "the same group as opal_common_ucx_tls",
    ),
    (
        "opal_common_ucx_verbose",
        "the same group as opal_common_ucx_tls",
    ),
    (
        "opal_common_ucx_progress_iterations",
        "the same group as opal_common_ucx_tls",
    ),
    (
        "opal_common_ucx_opal_mem_hooks",
        "the same group as opal_common_ucx_tls",
    ),
];

#[test]
fn open_mpi_every_variable_agrees_with_ompi_info() {
    let mpi = Mpi::OpenMpiG;
    let ours = listing(mpi, &[]);
    assert_eq!(ours["family"], "open-mpi");
    assert_eq!(ours["errors"], serde_json::json!([]), "MPI_T errors");
    let out = clean(
        Command::new(mpi.prefix().unwrap().join("bin/ompi_info")).args([
            "--all",
            "--internal",
            "--parsable",
        ]),
    )
    .output()
    .expect("run ompi_info");
    assert!(out.status.success());
    // mca:<framework>:<component>:param:<name>:<key>:<rest>
    let mut theirs: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.splitn(7, ':').collect();
        if f.len() == 7 && f[0] == "mca" && f[3] == "param" {
            let entry = theirs.entry(f[4].to_owned()).or_default();
            match f[5] {
                "value" => entry.0 = f[6].to_owned(),
                "type" => entry.1 = f[6].to_owned(),
                _ => {}
            }
        }
    }
    let vars = ours["variables"].as_array().unwrap();
    let names: BTreeSet<&str> = vars.iter().map(|v| v["name"].as_str().unwrap()).collect();
    let only_ours: BTreeSet<&str> = names
        .iter()
        .copied()
        .filter(|n| !theirs.contains_key(*n))
        .collect();
    let only_theirs: Vec<&String> = theirs
        .keys()
        .filter(|n| !names.contains(n.as_str()))
        .collect();
    let expected_only_ours: BTreeSet<&str> = ONLY_IN_MPI_T.iter().map(|(n, _)| *n).collect();
    assert_eq!(only_ours, expected_only_ours);
    assert_eq!(only_theirs, Vec::<&String>::new());
    let mut compared = 0;
    let mut differences = Vec::new();
    for v in vars {
        let name = v["name"].as_str().unwrap();
        let Some((value, kind)) = theirs.get(name) else {
            continue;
        };
        compared += 1;
        let datatype = v["datatype"].as_str().unwrap();
        if !mca_type(datatype).contains(&kind.as_str()) {
            differences.push(format!("{name}: type {datatype} vs {kind}"));
        }
        // ompi_info quotes strings that hold its separator.
        let theirs = value
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(value);
        let ours = our_text(v).unwrap_or_else(|| format!("(no value: {})", v["no_value"]));
        let same = match (datatype, v.get("enumeration")) {
            ("MPI_DOUBLE", _) => ours.parse::<f64>().ok() == theirs.parse::<f64>().ok(),
            // A flag enumeration's 0 is no flag, which ompi_info prints as
            // nothing.
            (_, Some(_)) if ours == "0" && theirs.is_empty() => true,
            _ => ours == theirs,
        };
        if !same && !DANGLING_STORAGE.contains(&name) {
            differences.push(format!("{name}: {ours:?} vs ompi_info {theirs:?}"));
        }
    }
    assert_eq!(compared, vars.len() - ONLY_IN_MPI_T.len());
    assert!(compared > 1000, "only {compared} variables compared");
    assert_eq!(differences, Vec::<String>::new());
}

/// The deviations --check reports for a library: (rule, message) pairs.
fn check_findings(lib_args: &[&str]) -> (Option<i32>, BTreeSet<(String, String)>) {
    let mut args = vec!["cvars", "--check", "--json"];
    args.extend_from_slice(lib_args);
    let out = run(&args);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (out.status.code(), findings)
}

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect()
}

/// What --check finds in Open MPI 4.1.4, each verified by hand against its
/// source (README: "MPI_T conformance of the test MPIs").
const OPEN_MPI_FINDINGS: &[(&str, &str)] = &[
    (
        "index-range",
        "MPI_T_cvar_get_info for an index outside 0..num-1 returned MPI_T_ERR_INVALID, not \
         MPI_T_ERR_INVALID_INDEX",
    ),
    (
        "index-range",
        "MPI_T_cvar_handle_alloc for an index outside 0..num-1 returned MPI_T_ERR_INVALID, not \
         MPI_T_ERR_INVALID_INDEX",
    ),
    (
        "string-return",
        "cvar description: a buffer of the exact size does not give the string's length plus one",
    ),
    (
        "string-return",
        "cvar description: a cut string gives the buffer's length, not the full string's length \
         plus one",
    ),
    (
        "string-return",
        "cvar description: a length of 0 does not give the string's length plus one",
    ),
    (
        "string-return",
        "cvar description: a length of 0 still writes into the buffer",
    ),
    (
        "string-return",
        "cvar description: an empty string (no description) comes back with length 0; the \
         standard wants 1 (the NUL)",
    ),
    (
        "string-return",
        "cvar name: a cut string gives the buffer's length, not the full string's length plus one",
    ),
    (
        "string-return",
        "enumeration item name: a cut string gives the buffer's length, not the full string's \
         length plus one",
    ),
    (
        "string-return",
        "enumeration name: a cut string gives the buffer's length, not the full string's length \
         plus one",
    ),
    (
        "constants",
        "datatype MPI_C_BOOL, which MPI_T does not allow (only MPI_INT, MPI_UNSIGNED, \
         MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_COUNT, MPI_CHAR, MPI_DOUBLE)",
    ),
    (
        "enumerations",
        "an enumeration on a variable of datatype MPI_C_BOOL, not MPI_INT",
    ),
    (
        "enumerations",
        "an enumeration on a variable of datatype MPI_UNSIGNED, not MPI_INT",
    ),
    (
        "enum-item-range",
        "MPI_T_enum_get_item for item num returned MPI_T_ERR_INVALID_INDEX, not \
         MPI_T_ERR_INVALID_ITEM",
    ),
    (
        "enum-item-range",
        "MPI_T_enum_get_item for item -1 crashes (the helper was killed by SIGSEGV)",
    ),
    (
        "null-handle",
        "MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL crashes (the helper was killed by SIGSEGV)",
    ),
    (
        "null-handle",
        "MPI_T_cvar_write of MPI_T_CVAR_HANDLE_NULL crashes (the helper was killed by SIGSEGV)",
    ),
    (
        "null-handle",
        "MPI_T_enum_get_info of MPI_T_ENUM_NULL crashes (the helper was killed by SIGSEGV)",
    ),
];

#[test]
fn open_mpi_check_lists_its_known_deviations() {
    let prefix = Mpi::OpenMpiG.prefix().unwrap().display().to_string();
    let (code, findings) = check_findings(&["--mpi", &prefix]);
    assert_eq!(code, Some(24));
    assert_eq!(findings, pairs(OPEN_MPI_FINDINGS));
}

/// What --check finds in MPICH 4.0.2, each verified by hand against its
/// source (README: "MPI_T conformance of the test MPIs").
const MPICH_FINDINGS: &[(&str, &str)] = &[
    (
        "string-return",
        "cvar description: a cut string gives the buffer's length, not the full string's length \
         plus one",
    ),
    (
        "string-return",
        "cvar name: a cut string gives the buffer's length, not the full string's length plus one",
    ),
    (
        "nesting",
        "MPI_T_cvar_get_num after initialising again crashes (the helper was killed by SIGSEGV)",
    ),
];

#[test]
fn mpich_check_lists_its_known_deviations() {
    let prefix = Mpi::Mpich.prefix().unwrap().display().to_string();
    let (code, findings) = check_findings(&["--mpi", &prefix]);
    assert_eq!(code, Some(24));
    assert_eq!(findings, pairs(MPICH_FINDINGS));
}

/// Launches `queues` under `mpi` with `env` and waits for it.
fn launch(mpi: Mpi, env: &[(&str, &str)]) -> Job {
    let opts = LaunchOptions {
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        ..LaunchOptions::default()
    };
    Job::launch_with(mpi, "queues", 2, &[], &opts).expect("queues job")
}

/// `mqs-dump cvars --pid PID --json --filter NAME`: the one variable.
fn live_variable(pid: u32, name: &str, env: &[(&str, &str)]) -> (Value, Value) {
    let pid = pid.to_string();
    let out = run_env(&["cvars", "--pid", &pid, "--json", "--filter", name], env);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let variable = report["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {report}"))
        .clone();
    (report, variable)
}

/// The job's ranks, as the report lists them: (pid, rank).
fn ranks_of(job: &Job) -> Vec<Value> {
    job.rank_pids()
        .iter()
        .map(|(rank, pid)| serde_json::json!({"pid": pid, "rank": rank}))
        .collect()
}

/// A job started with `var=value` (for variable `name`) shows the value
/// and where it came from through --pid (starter and rank), and the
/// library's default through --mpi, even from a shell that sets `var`.
fn environment_override(mpi: Mpi, name: &str, var: &str, value: i64, untouched: &str) {
    let default = listing(mpi, &["--filter", name])["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed"))["value"]
        .clone();
    assert!(default.is_u64(), "{name}: default {default}");
    assert_ne!(default, value, "pick a value that is not the default");
    let value_text = value.to_string();
    let job = launch(mpi, &[(var, value_text.as_str())]);
    // The starter: every rank, merged.
    let (report, v) = live_variable(job.launcher_pid(), name, &[]);
    assert_eq!(report["launcher"], job.launcher_pid());
    assert_eq!(v["default"], default);
    assert_eq!(
        v["groups"],
        serde_json::json!([{
            "members": ranks_of(&job),
            "value": value,
            "source": {"kind": "environment", "variable": format!("{var}={value}")},
            "differs": true,
        }])
    );
    // One rank.
    let rank1 = job.rank_pid(1).unwrap();
    let (_, v) = live_variable(rank1, name, &[]);
    assert_eq!(v["groups"][0]["value"], value);
    assert_eq!(
        v["groups"][0]["members"],
        serde_json::json!([{"pid": rank1, "rank": 1}])
    );
    // A variable left alone is the default.
    let (_, v) = live_variable(rank1, untouched, &[]);
    assert_eq!(v["groups"][0]["differs"], false, "{v}");
    // The library's default, even from a shell that sets the variable.
    let ours = listing(mpi, &["--filter", name]);
    assert_eq!(ours["variables"][0]["value"], default);
    let out = {
        let prefix = mpi.prefix().unwrap().display().to_string();
        run_env(
            &["cvars", "--mpi", &prefix, "--json", "--filter", name],
            &[(var, value_text.as_str())],
        )
    };
    let shell: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shell["variables"][0]["value"], default);
    // The whole job: every variable of the listing is read in every rank
    // (MPICH) or is in the registry or known to be deregistered (Open
    // MPI), and what differs from the default says where from.
    let pid = job.launcher_pid().to_string();
    let out = run(&["cvars", "--pid", &pid, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut read = 0;
    for v in all["variables"].as_array().unwrap() {
        for g in v["groups"].as_array().unwrap() {
            if g.get("value").is_some() {
                read += 1;
            } else if mpi == Mpi::Mpich {
                panic!("{} not read: {g}", v["name"]);
            }
            if g["differs"] == true {
                let kind = g["source"]["kind"].as_str().unwrap();
                assert!(
                    ["environment", "changed", "file", "command-line"].contains(&kind),
                    "{}: {g}",
                    v["name"]
                );
            }
            if mpi == Mpi::Mpich && g["differs"] == true {
                // MPICH's ranks get nothing but the environment.
                assert_eq!(g["source"]["kind"], "environment", "{}: {g}", v["name"]);
            }
        }
    }
    assert!(read > 300, "only {read} values read");
    // Read, never stopped: the job runs on.
    for (_, pid) in job.rank_pids() {
        assert_running_untraced(pid);
    }
    let text = stdout(&run(&["cvars", "--pid", &pid, "--filter", name]));
    assert!(
        text.contains(&format!(
            "{name}  = {value}   (default {default}; from environment {var}={value})"
        )),
        "{text}"
    );
    job.shutdown().expect("shutdown");
}

#[test]
fn open_mpi_environment_override_shows_through_pid_and_the_default_through_mpi() {
    environment_override(
        Mpi::OpenMpiG,
        "btl_vader_eager_limit",
        "OMPI_MCA_btl_vader_eager_limit",
        8192,
        "btl_vader_max_send_size",
    );
}

#[test]
fn mpich_environment_override_shows_through_pid_and_the_default_through_mpi() {
    environment_override(
        Mpi::Mpich,
        "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE",
        "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE",
        65536,
        "MPIR_CVAR_CH3_RMA_OP_PIGGYBACK_LOCK_DATA_SIZE",
    );
}

#[test]
fn open_mpi_release_build_says_why_values_cannot_be_read() {
    let job = launch(Mpi::OpenMpiRelease, &[]);
    let pid = job.rank_pid(0).unwrap().to_string();
    let out = run(&["cvars", "--pid", &pid]);
    assert_error(&out, 6, &["mca_base_var_t", "rebuild Open MPI with -g"]);
    assert_running_untraced(job.rank_pid(0).unwrap());
}

#[test]
fn open_mpi_settings_say_how_to_apply_them() {
    let prefix = Mpi::OpenMpiG.prefix().unwrap().display().to_string();
    let out = run(&[
        "cvars",
        "--mpi",
        &prefix,
        "--set",
        "btl_vader_eager_limit=8192",
        "--set",
        "coll_tuned_bcast_algorithm=binomial",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("btl_vader_eager_limit=8192: valid at start-up"),
        "{text}"
    );
    assert!(
        text.contains("  export OMPI_MCA_btl_vader_eager_limit=8192\n"),
        "{text}"
    );
    assert!(
        text.contains("  mpirun --mca btl_vader_eager_limit 8192 ...\n"),
        "{text}"
    );
    assert!(
        text.contains("coll_tuned_bcast_algorithm=binomial: valid"),
        "{text}"
    );
    let out = run(&[
        "cvars",
        "--mpi",
        &prefix,
        "--set",
        "btl_vader_eager_limit=-1",
    ]);
    assert_eq!(out.status.code(), Some(23));
}

/// Compiles `tests/support/mpit_abi_probe.c` with `mpi`'s mpicc and runs it.
fn probe(mpi: Mpi) -> BTreeMap<String, String> {
    let dir = mqs_tests::target_dir().join("mqs-support").join(mpi.name());
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("mpit_abi_probe");
    let src = mqs_tests::workspace_root().join("tests/support/mpit_abi_probe.c");
    let status = Command::new(mpi.mpicc().unwrap())
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("run mpicc");
    assert!(status.success(), "compiling the probe failed");
    let out = Command::new(&exe).output().expect("run the probe");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What abi.rs says, in the probe's words.
fn table(abi: &Abi) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    let mut put = |k: String, v: String| {
        t.insert(k, v);
    };
    put("MPI_SUCCESS".into(), "0".into());
    put("MPI_THREAD_SINGLE".into(), "0".into());
    put("MPI_THREAD_MULTIPLE".into(), "3".into());
    put("MPI_T_ENUM_NULL".into(), "0".into());
    put("MPI_T_CVAR_HANDLE_NULL".into(), "0".into());
    let upper = |s: &str| s.to_ascii_uppercase().replace('/', "_");
    for (v, raw) in Verbosity::ALL.iter().zip(abi.verbosity) {
        put(
            format!("MPI_T_VERBOSITY_{}", upper(&v.as_str())),
            raw.to_string(),
        );
    }
    for (s, raw) in Scope::ALL.iter().zip(abi.scope) {
        put(
            format!("MPI_T_SCOPE_{}", upper(&s.as_str())),
            raw.to_string(),
        );
    }
    for (b, raw) in Bind::ALL.iter().zip(abi.bind) {
        let name = match b {
            Bind::NoObject => "MPI_T_BIND_NO_OBJECT".to_owned(),
            other => format!("MPI_T_BIND_{}", other.as_str()),
        };
        put(name, raw.to_string());
    }
    for (e, code) in abi.errors {
        put(e.name().to_owned(), code.to_string());
    }
    match abi.datatypes {
        DatatypeHandles::Symbols(list) => {
            for (d, symbol) in list {
                put(d.mpi_name().to_owned(), symbol.to_string());
            }
        }
        DatatypeHandles::Ints(list) => {
            for (d, value) in list {
                put(d.mpi_name().to_owned(), value.to_string());
            }
        }
    }
    t
}

fn assert_abi(mpi: Mpi, abi: &Abi) {
    let probe = probe(mpi);
    let table = table(abi);
    assert_eq!(table.len(), probe.len(), "{probe:?}");
    assert_eq!(table, probe);
    // Every datatype and every error of the model is in the table.
    assert_eq!(
        Datatype::ALL.len(),
        match abi.datatypes {
            DatatypeHandles::Symbols(l) => l.len(),
            DatatypeHandles::Ints(l) => l.len(),
        }
    );
    assert_eq!(abi.errors.len(), 16);
    assert!(abi.errors.iter().any(|(e, _)| *e == MpiTError::InvalidName));
}

#[test]
fn open_mpi_constants_are_those_of_its_mpi_h() {
    assert_abi(Mpi::OpenMpiG, &OPEN_MPI);
}

#[test]
fn mpich_constants_are_those_of_its_mpi_h() {
    assert_abi(Mpi::Mpich, &MPICH);
}

/// MPICH's own `mpivars` program: the installed one, else built from the
/// MPICH source `scripts/setup-mpis` unpacked, with MPICH's mpicc.
fn mpivars() -> std::path::PathBuf {
    let mpi = Mpi::Mpich;
    let prefix = mpi.prefix().expect("MPICH built");
    let installed = prefix.join("bin/mpivars");
    if installed.is_file() {
        return installed;
    }
    let cache = prefix.parent().expect("the cache directory");
    let src = cache.join("src/mpich-4.0.2/src/env/mpivars.c");
    assert!(
        src.is_file(),
        "{} is missing: scripts/setup-mpis unpacks the MPICH source there",
        src.display()
    );
    let dir = mqs_tests::target_dir().join("mqs-support").join(mpi.name());
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("mpivars");
    let status = Command::new(mpi.mpicc().unwrap())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run mpicc");
    assert!(status.success(), "building mpivars failed");
    exe
}

/// One control variable as mpivars prints it.
#[derive(Debug, PartialEq, Eq)]
struct MpivarsLine {
    value: Option<String>,
    scope: String,
    binding: String,
    datatype: String,
    verbosity: String,
}

/// The control-variable section of `mpivars -nodesc`, by name.
fn mpivars_listing() -> BTreeMap<String, MpivarsLine> {
    let mpi = Mpi::Mpich;
    let out = clean(
        Command::new(mpi.launcher().unwrap())
            .args(["-n", "1", "-launcher", "fork"])
            .arg(mpivars())
            .arg("-nodesc"),
    )
    .output()
    .expect("run mpivars");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let count: usize = header
        .strip_suffix(" MPI Control Variables")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {header:?}"));
    let mut vars = BTreeMap::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        // "Enum name (n) values: ..." lines follow enumerated variables.
        let Some(line) = line.strip_prefix('\t') else {
            continue;
        };
        let fields: Vec<&str> = line.split('\t').collect();
        assert!(fields.len() >= 5, "{line:?}");
        let (name, value) = match fields[0].split_once('=') {
            Some((name, value)) => (name.trim_end(), Some(value.to_owned())),
            None => (fields[0].trim_end(), None),
        };
        vars.insert(
            name.to_owned(),
            MpivarsLine {
                value,
                scope: fields[1].to_owned(),
                binding: fields[2].to_owned(),
                datatype: fields[3].to_owned(),
                verbosity: fields[4].to_owned(),
            },
        );
    }
    assert_eq!(vars.len(), count, "{text}");
    vars
}

#[test]
fn mpich_every_variable_agrees_with_mpivars() {
    let theirs = mpivars_listing();
    let ours = listing(Mpi::Mpich, &[]);
    assert_eq!(ours["family"], "mpich");
    assert_eq!(ours["errors"], serde_json::json!([]), "MPI_T errors");
    let vars = ours["variables"].as_array().unwrap();
    let names: BTreeSet<String> = vars
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect();
    let their_names: BTreeSet<String> = theirs.keys().cloned().collect();
    assert_eq!(names, their_names);
    assert_eq!(ours["num_cvars"], theirs.len());
    let mut differences = Vec::new();
    let mut values = 0;
    for v in vars {
        let name = v["name"].as_str().unwrap();
        let t = &theirs[name];
        let upper = |s: &str| s.to_ascii_uppercase().replace('/', "_");
        let ours_line = MpivarsLine {
            // mpivars prints scalars of integer types and strings that fit.
            value: t.value.as_ref().and(our_text_mpivars(v)),
            scope: format!("SCOPE_{}", upper(v["scope"].as_str().unwrap())),
            binding: match v["bind"].as_str().unwrap() {
                "no_object" => "No-object".to_owned(),
                other => other.to_owned(),
            },
            datatype: v["datatype"].as_str().unwrap().to_owned(),
            verbosity: format!("VERBOSITY_{}", upper(v["verbosity"].as_str().unwrap())),
        };
        if t.value.is_some() {
            values += 1;
        }
        // mpivars reads after MPI_Init, mqs-dump (MPI_T alone, as a tool
        // does) before it: no value differs for that in MPICH 4.0.2.
        if &ours_line != t {
            differences.push(format!("{name}: ours {ours_line:?}, mpivars {t:?}"));
        }
    }
    assert_eq!(differences, Vec::<String>::new());
    assert!(values > 100, "only {values} values compared");
}

/// A value as mpivars prints it: the number (an enumeration's too), the
/// string.
fn our_text_mpivars(v: &Value) -> Option<String> {
    match v.get("value")? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(i32::from(*b).to_string()),
        other => Some(other.to_string()),
    }
}
