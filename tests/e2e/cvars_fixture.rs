//! `mqs-dump cvars` against `tests/support/mpit_fixture.c`, a stand-in MPI
//! library whose MPI_T follows the standard, breaks one rule on request,
//! or crashes, aborts, exits or hangs: the listing, --set, --check rule by
//! rule, and every way a library can fail the tool.

mod support;

use std::path::PathBuf;

use mqs_cvars::check::RULES;
use serde_json::Value;
use support::*;

const USAGE: i32 = 2;
const NOT_MPI_LIBRARY: i32 = 20;
const NO_MPI_T: i32 = 21;
const HELPER_FAILED: i32 = 22;
const CVAR_REJECTED: i32 = 23;
const NOT_CONFORMANT: i32 = 24;

fn fixture() -> PathBuf {
    support_program("mpit_fixture", &[], true)
}

fn lib_args(lib: &std::path::Path) -> Vec<String> {
    vec!["cvars".into(), "--lib".into(), lib.display().to_string()]
}

/// Runs `mqs-dump cvars --lib FIXTURE extra...` with `env`.
fn cvars(extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut args = lib_args(&fixture());
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_env(&args, env)
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn listing_shows_every_variable_with_its_value() {
    let listing = json_of(&cvars(&["--json"], &[]));
    assert_eq!(listing["family"], "mpich");
    assert_eq!(listing["mpi_version"], "mqs MPI_T fixture 1.0");
    assert_eq!(listing["num_cvars"], 8);
    assert_eq!(listing["errors"], serde_json::json!([]));
    let vars = listing["variables"].as_array().unwrap();
    let summary: Vec<(String, String, String, String, String, String)> = vars
        .iter()
        .map(|v| {
            (
                v["name"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("MPIR_CVAR_")
                    .to_owned(),
                v["datatype"].as_str().unwrap().to_owned(),
                v["verbosity"].as_str().unwrap().to_owned(),
                v["scope"].as_str().unwrap().to_owned(),
                v["bind"].as_str().unwrap().to_owned(),
                v.get("value").map_or("-".into(), |x| x.to_string()),
            )
        })
        .collect();
    let want = [
        (
            "MQS_EAGER_LIMIT",
            "MPI_INT",
            "user/basic",
            "local",
            "no_object",
            "4096",
        ),
        (
            "MQS_PROTOCOL",
            "MPI_INT",
            "user/detail",
            "all_eq",
            "no_object",
            "2",
        ),
        (
            "MQS_BUFFER_BYTES",
            "MPI_UNSIGNED_LONG",
            "tuner/detail",
            "local",
            "no_object",
            "1048576",
        ),
        (
            "MQS_DEVICE",
            "MPI_CHAR",
            "user/all",
            "readonly",
            "no_object",
            "\"ch3:nemesis\"",
        ),
        (
            "MQS_BACKOFF",
            "MPI_DOUBLE",
            "tuner/all",
            "local",
            "no_object",
            "0.25",
        ),
        (
            "MQS_COMM_HINT",
            "MPI_INT",
            "tuner/basic",
            "local",
            "MPI_COMM",
            "-",
        ),
        (
            "MQS_VERSION",
            "MPI_INT",
            "user/basic",
            "constant",
            "no_object",
            "3",
        ),
        (
            "MQS_RANGE",
            "MPI_INT",
            "tuner/basic",
            "group_eq",
            "no_object",
            "[1,64]",
        ),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(a, b, c, d, e, f)| {
            (
                a.to_string(),
                b.to_string(),
                c.to_string(),
                d.to_string(),
                e.to_string(),
                f.to_string(),
            )
        })
        .collect();
    assert_eq!(summary, want);
    // The enumeration, resolved; the count; why a bound one has no value;
    // an empty description.
    assert_eq!(vars[1]["value_name"], "auto");
    assert_eq!(
        vars[1]["enumeration"],
        serde_json::json!({"name": "mqs_protocol", "items": [
            {"value": 0, "name": "eager"}, {"value": 1, "name": "rndv"}, {"value": 2, "name": "auto"}]})
    );
    assert_eq!(vars[7]["count"], 2);
    assert_eq!(vars[3]["count"], 64);
    assert!(vars[5]["no_value"]
        .as_str()
        .unwrap()
        .contains("bound to MPI_COMM"));
    assert_eq!(vars[6]["description"], "");
}

#[test]
fn the_table_has_a_line_per_variable() {
    let out = cvars(&[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("8 control variables, 8 shown"), "{text}");
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "VALUE",
            "DATATYPE",
            "VERBOSITY",
            "SCOPE",
            "BINDING",
            "DESCRIPTION"
        ]
    );
    let row = |name: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name} in {text}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(
        row("MPIR_CVAR_MQS_PROTOCOL")[..7],
        [
            "MPIR_CVAR_MQS_PROTOCOL",
            "auto",
            "(2)",
            "MPI_INT",
            "user/detail",
            "all_eq",
            "no_object"
        ]
    );
    assert_eq!(row("MPIR_CVAR_MQS_COMM_HINT")[1], "-");
    assert_eq!(row("MPIR_CVAR_MQS_RANGE")[1], "1,64");
    assert!(
        text.contains("mqs_protocol: eager (0), rndv (1), auto (2)"),
        "{text}"
    );
}

#[test]
fn filter_and_verbosity_narrow_the_listing() {
    let names = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        json_of(&cvars(&args, &[]))["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&["--filter", "eager"]), ["MPIR_CVAR_MQS_EAGER_LIMIT"]);
    // Descriptions count too.
    assert_eq!(names(&["--filter", "back off"]), ["MPIR_CVAR_MQS_BACKOFF"]);
    assert_eq!(
        names(&["--filter", "*_B*"]),
        ["MPIR_CVAR_MQS_BUFFER_BYTES", "MPIR_CVAR_MQS_BACKOFF"]
    );
    assert_eq!(
        names(&["--verbosity", "user/basic"]),
        ["MPIR_CVAR_MQS_EAGER_LIMIT", "MPIR_CVAR_MQS_VERSION"]
    );
    assert_eq!(names(&["--verbosity", "4"]).len(), 6);
    let out = cvars(&["--verbosity", "10"], &[]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
}

#[test]
fn a_conformant_library_passes_every_rule() {
    let out = cvars(&["--check"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains(&format!("follows all {} rules", RULES.len())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn each_broken_rule_is_caught_by_that_rule_alone() {
    for rule in RULES {
        let out = cvars(&["--check"], &[("MQS_FIXTURE_BREAK", rule.id)]);
        assert_eq!(
            out.status.code(),
            Some(NOT_CONFORMANT),
            "{}: {}",
            rule.id,
            stderr(&out)
        );
        let text = stdout(&out);
        assert!(!text.is_empty(), "{}: nothing found", rule.id);
        for line in text.lines() {
            assert!(
                line.starts_with(&format!("{}: ", rule.id)),
                "breaking {} gave: {line}",
                rule.id
            );
        }
        let report = {
            let out = cvars(&["--check", "--json"], &[("MQS_FIXTURE_BREAK", rule.id)]);
            assert_eq!(out.status.code(), Some(NOT_CONFORMANT));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        let rules: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap())
            .collect();
        assert!(
            !rules.is_empty() && rules.iter().all(|r| *r == rule.id),
            "{}: {rules:?}",
            rule.id
        );
    }
}

#[test]
fn a_crash_in_a_rule_is_a_finding_and_the_later_rules_still_run() {
    let out = cvars(
        &["--check"],
        &[("MQS_FIXTURE_BREAK", "null-handle,nesting")],
    );
    assert_eq!(out.status.code(), Some(NOT_CONFORMANT));
    let text = stdout(&out);
    assert!(
        text.contains(
            "null-handle: MPI_T_cvar_read of MPI_T_CVAR_HANDLE_NULL crashes (the helper was \
             killed by SIGSEGV)"
        ),
        "{text}"
    );
    // The steps after the crash ran in a new helper: no other null-handle
    // finding, and nesting (the last rule) was reached.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("null-handle"))
            .count(),
        1
    );
    assert!(text.lines().any(|l| l.starts_with("nesting: ")), "{text}");
}

#[test]
fn strings_are_checked_with_short_exact_and_empty_buffers() {
    let out = cvars(
        &["--check", "--json"],
        &[("MQS_FIXTURE_BREAK", "string-return")],
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let messages: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    // Names and descriptions of variables, enumerations and their items.
    for what in [
        "cvar name",
        "cvar description",
        "enumeration name",
        "enumeration item name",
    ] {
        assert!(
            messages.contains(
                &format!(
                    "{what}: a cut string gives the buffer's length, not the full string's length \
                 plus one"
                )
                .as_str()
            ),
            "{what}: {messages:?}"
        );
    }
}

/// Processes still running with this test's tag (a helper, say).
fn helpers_left(tag: &str) -> Vec<u32> {
    mqs_tests::processes_with_env("MQS_CVARS_TEST_TAG", tag)
        .into_iter()
        .filter(|p| p.alive())
        .map(|p| p.pid)
        .collect()
}

#[test]
fn a_library_that_crashes_aborts_exits_or_hangs_is_reported() {
    let cases = [
        (
            "crash-in-init",
            "was killed by SIGSEGV while initialising the tool interface",
        ),
        (
            "abort-in-init",
            "was killed by SIGABRT while initialising the tool interface",
        ),
        (
            "exit-in-init",
            "exited with status 3 while initialising the tool interface",
        ),
        (
            "hang-in-init",
            "did not answer within 2 s and was killed while initialising",
        ),
        (
            "crash-in-read",
            "was killed by SIGSEGV while reading cvar 0 (MPIR_CVAR_MQS_EAGER_LIMIT)",
        ),
    ];
    for (mode, needle) in cases {
        let tag = format!("{}-{mode}", std::process::id());
        let out = cvars(
            &["--timeout", "2"],
            &[("MQS_FIXTURE_MODE", mode), ("MQS_CVARS_TEST_TAG", &tag)],
        );
        assert_error(
            &out,
            HELPER_FAILED,
            &["the helper process that loads it", needle],
        );
        assert_eq!(
            helpers_left(&tag),
            Vec::<u32>::new(),
            "{mode}: helper left running"
        );
    }
}

#[test]
fn what_a_library_prints_does_not_corrupt_the_answer() {
    let listing = json_of(&cvars(
        &["--json"],
        &[("MQS_FIXTURE_MODE", "print-in-init")],
    ));
    assert_eq!(listing["num_cvars"], 8);
}

#[test]
fn a_library_that_is_not_mpi_or_has_no_mpi_t_has_its_own_error() {
    let not_mpi = support_program("mpit_fixture", &["-DNOT_MPI"], true);
    let out = run(&lib_args(&not_mpi)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_error(&out, NOT_MPI_LIBRARY, &["not an MPI library"]);

    let text = mqs_tests::target_dir().join("mqs-support/not-a-library.so");
    std::fs::write(&text, "not ELF").unwrap();
    let out = run(&lib_args(&text)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_error(&out, NOT_MPI_LIBRARY, &["cannot be loaded"]);

    let out = run(&["cvars", "--lib", "/nonexistent/libmpi.so"]);
    assert_error(&out, NOT_MPI_LIBRARY, &["no such file"]);

    let out = run(&["cvars", "--mpi", "/nonexistent"]);
    assert_error(&out, NOT_MPI_LIBRARY, &["no libmpi.so"]);

    let no_t = support_program("mpit_fixture", &["-DNO_MPI_T"], true);
    for op in [&[][..], &["--check"][..], &["--set", "X=1"][..]] {
        let mut args = lib_args(&no_t);
        args.extend(op.iter().map(|s| s.to_string()));
        let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_error(
            &out,
            NO_MPI_T,
            &["without the MPI tool interface", "MPI_T_init_thread"],
        );
    }
}

#[test]
fn values_are_defaults_unless_the_environment_is_kept() {
    let env = [("MPIR_CVAR_MQS_EAGER_LIMIT", "1")];
    let listing = json_of(&cvars(&["--json", "--filter", "eager"], &env));
    assert_eq!(listing["variables"][0]["value"], 4096);
    assert!(listing["environment_cleared"]
        .as_array()
        .unwrap()
        .contains(&"MPIR_CVAR_MQS_EAGER_LIMIT".into()));
    let listing = json_of(&cvars(&["--json", "--filter", "eager", "--keep-env"], &env));
    assert_eq!(listing["variables"][0]["value"], 1);
}

#[test]
fn settings_are_checked_by_writing_them_in_the_helper() {
    let sets = [
        "MPIR_CVAR_MQS_EAGER_LIMIT=8192",
        "MPIR_CVAR_MQS_PROTOCOL=rndv",
        "MPIR_CVAR_MQS_DEVICE=ch4:ofi",
        "MPIR_CVAR_MQS_COMM_HINT=1",
        "MPIR_CVAR_MQS_PROTOCOL=fast",
        "MPIR_CVAR_MQS_VERSION=4",
        "MPIR_CVAR_MQS_EAGER_LIMIT=lots",
        "MPIR_CVAR_MQS_EAGER_LIMIT=99999999999",
        "MPIR_CVAR_MQS_NOPE=1",
    ];
    let mut args = vec!["--json"];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let out = cvars(&args, &[]);
    assert_eq!(out.status.code(), Some(CVAR_REJECTED), "{}", stderr(&out));
    let results: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        [
            "accepted",
            "accepted",
            "startup-only",
            "not-checked",
            "rejected",
            "rejected",
            "rejected",
            "rejected",
            "rejected"
        ]
    );
    assert_eq!(
        results[0]["apply"],
        serde_json::json!([
            "export MPIR_CVAR_MQS_EAGER_LIMIT=8192",
            "mpiexec -genv MPIR_CVAR_MQS_EAGER_LIMIT 8192 ..."
        ])
    );
    // An enumeration's value is applied by its item name.
    assert_eq!(results[1]["apply"][0], "export MPIR_CVAR_MQS_PROTOCOL=rndv");
    let reason = |i: usize| results[i]["reason"].as_str().unwrap().to_owned();
    assert!(
        reason(4).contains("nor one of the items of mqs_protocol: eager (0)"),
        "{}",
        reason(4)
    );
    assert!(reason(5).contains("constant"), "{}", reason(5));
    assert!(reason(6).contains("not an integer"), "{}", reason(6));
    assert!(reason(7).contains("does not fit"), "{}", reason(7));
    assert!(
        reason(8).contains("MPI_T_ERR_INVALID_NAME"),
        "{}",
        reason(8)
    );

    // A valid setting alone: exit 0, and the text says how to apply it.
    let out = cvars(&["--set", "MPIR_CVAR_MQS_BACKOFF=0.5"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("  export MPIR_CVAR_MQS_BACKOFF=0.5\n"),
        "{}",
        stdout(&out)
    );
    let out = cvars(&["--set", "MPIR_CVAR_MQS_BACKOFF"], &[]);
    assert_error(&out, USAGE, &["NAME=VALUE expected"]);
}

#[test]
fn a_pid_that_is_no_mpi_process_is_refused() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("start sleep");
    let pid = sleeper.id().to_string();
    let out = run(&["cvars", "--pid", &pid]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_error(&out, 5, &["not an MPI process", "no libmpi.so mapped"]);
    let out = run(&["cvars", "--pid", "999999999"]);
    assert_error(&out, 3, &["no process with pid 999999999"]);
}

#[test]
fn a_hung_helper_dies_with_the_tool() {
    let tag = format!("{}-killed", std::process::id());
    let mut args = lib_args(&fixture());
    args.extend(["--timeout", "600"].map(String::from));
    let mut tool = std::process::Command::new(mqs_dump())
        .args(&args)
        .env("MQS_FIXTURE_MODE", "hang-in-init")
        .env("MQS_CVARS_TEST_TAG", &tag)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start mqs-dump");
    // Wait for the helper to hang in the library.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while helpers_left(&tag).len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no helper started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    tool.kill().unwrap();
    tool.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !helpers_left(&tag).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the helper outlived mqs-dump: {:?}",
            helpers_left(&tag)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn mpi_t_errors_name_the_variable_and_the_rest_is_listed() {
    let listing = json_of(&cvars(&["--json"], &[("MQS_FIXTURE_MODE", "errors")]));
    let names: Vec<&str> = listing["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    assert!(!names.contains(&"MPIR_CVAR_MQS_BACKOFF"));
    assert_eq!(
        listing["errors"],
        serde_json::json!([
            {"index": 2, "name": "MPIR_CVAR_MQS_BUFFER_BYTES", "call": "MPI_T_cvar_read",
             "code": 74, "error": "MPI_T_ERR_INVALID"},
            {"index": 4, "call": "MPI_T_cvar_get_info", "code": 62,
             "error": "MPI_T_ERR_INVALID_INDEX"},
        ])
    );
    assert_eq!(
        listing["variables"][2]["no_value"],
        "MPI_T_cvar_read returned MPI_T_ERR_INVALID"
    );
    let out = cvars(&[], &[("MQS_FIXTURE_MODE", "errors")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "cvar 2 (MPIR_CVAR_MQS_BUFFER_BYTES): MPI_T_cvar_read returned MPI_T_ERR_INVALID (74)"
        ),
        "{text}"
    );
    assert!(
        text.contains("cvar 4: MPI_T_cvar_get_info returned MPI_T_ERR_INVALID_INDEX (62)"),
        "{text}"
    );
}

#[test]
fn without_a_library_the_mpicc_on_path_names_the_mpi() {
    use std::os::unix::fs::PermissionsExt;
    let prefix =
        mqs_tests::target_dir().join(format!("mqs-scratch/cvars-prefix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    let mpicc = prefix.join("bin/mpicc");
    std::fs::write(&mpicc, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&mpicc, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(fixture(), prefix.join("lib/libmpi.so.12")).unwrap();
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = run_env(&["cvars", "--json"], &[("PATH", &path)]);
    let listing = json_of(&out);
    assert_eq!(
        listing["library"],
        prefix.join("lib/libmpi.so.12").display().to_string()
    );
    assert_eq!(listing["num_cvars"], 8);
    // No mpicc anywhere: say what to give.
    let out = run_env(&["cvars"], &[("PATH", "/nonexistent")]);
    assert_error(&out, USAGE, &["no mpicc on PATH", "--mpi PREFIX"]);
    std::fs::remove_dir_all(&prefix).unwrap();
}
