//! `mqs-dump typepack`: make a type pack from a library's DWARF, check one
//! against a library, list the names DLLs looked up in saved snapshots.
//! Also the type-source options every dumping command shares.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use clap::{Args, Subcommand};
use mqs_acquire::typepack::check::{self, CheckOptions};
use mqs_acquire::typepack::extract::{self, ExtractOptions};
use mqs_acquire::typepack::queries::Queries;

/// Where types come from besides the MPI's own DWARF (shared by the
/// commands that dump).
#[derive(Debug, Clone, Default, Args)]
pub struct TypeSourceArgs {
    /// Also look for type packs here (repeatable), before the installed
    /// ones and ~/.cache/mqs/typepacks.
    #[arg(long, value_name = "DIR")]
    pub typepack: Vec<PathBuf>,

    /// Never fetch debug files from the debuginfod servers in
    /// DEBUGINFOD_URLS.
    #[arg(long)]
    pub offline: bool,
}

/// Type packs: the types and hidden symbols a message-queue DLL asks for,
/// taken from a library's DWARF once, for machines where the library is
/// stripped.
#[derive(Debug, Args)]
pub struct TypepackArgs {
    #[command(subcommand)]
    command: TypepackCommand,
}

#[derive(Debug, Subcommand)]
enum TypepackCommand {
    /// Write a pack for LIB from its DWARF (its own, its debug file's, or a
    /// rebuild's whose loaded bytes are proven equal with --built-lib).
    Extract(ExtractArgs),
    /// Verify a pack against LIB: its build-id, its symbols, and, where
    /// LIB's DWARF is here, every type, size and field offset.
    Check(CheckArgs),
    /// Print the names the DLLs looked up in saved snapshots (--save), as a
    /// query list for `extract --queries`.
    Queries(QueriesArgs),
}

#[derive(Debug, Args)]
struct ExtractArgs {
    /// The library the pack is for (keyed by its build-id).
    #[arg(long, value_name = "LIB")]
    lib: PathBuf,
    /// LIB's separate debug file, if LIB has no DWARF itself.
    #[arg(long, value_name = "FILE")]
    debug_file: Option<PathBuf>,
    /// Look for debug files (and dwz files) here too (repeatable).
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// Take the DWARF from this rebuild of LIB, after checking that it
    /// loads the same bytes as LIB (every allocated section but the
    /// build-id note); the pack is still keyed by LIB's build-id.
    #[arg(long, value_name = "LIB")]
    built_lib: Option<PathBuf>,
    /// Where the rebuild's code differs from LIB's (another compiler
    /// release), take its types alone if it has LIB's ABI: the same dynamic
    /// symbols, objects of the same sizes, data sections of the same sizes.
    /// No symbol LIB hides is packed; every process is still checked
    /// against the pack before it is read through it.
    #[arg(long, requires = "built_lib")]
    close_rebuild: bool,
    /// The names to pack: a query list (JSON) or a snapshot; default: what
    /// Open MPI 4.1's and 5.0's DLLs and ours ask for.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,
    /// Where the library comes from, for the pack's provenance.
    #[arg(long, value_name = "TEXT", default_value = "")]
    provenance: String,
    /// Write the pack to this file...
    #[arg(long, value_name = "FILE", conflicts_with = "out_dir")]
    out: Option<PathBuf>,
    /// ...or as <library>-<build-id>.json into this directory (default:
    /// ~/.cache/mqs/typepacks, where mqs-dump looks).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[arg(long, value_name = "LIB")]
    lib: PathBuf,
    /// LIB's separate debug file, to compare every type with.
    #[arg(long, value_name = "FILE")]
    debug_file: Option<PathBuf>,
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// The pack file, or a directory of packs (repeatable); default: where
    /// mqs-dump looks.
    #[arg(long, value_name = "PATH")]
    typepack: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct QueriesArgs {
    /// Snapshot files (repeatable).
    #[arg(long, value_name = "FILE", required = true)]
    snapshot: Vec<PathBuf>,
}

pub fn run(args: &TypepackArgs) -> ExitCode {
    let result = match &args.command {
        TypepackCommand::Extract(a) => run_extract(a),
        TypepackCommand::Check(a) => run_check(a),
        TypepackCommand::Queries(a) => run_queries(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::output::fail(e),
    }
}

fn run_extract(a: &ExtractArgs) -> Result<(), Error> {
    let queries = match &a.queries {
        Some(path) => Queries::load(path)?,
        None => Queries::builtin(),
    };
    let pack = extract::extract(&ExtractOptions {
        library: a.lib.clone(),
        debug_file: a.debug_file.clone(),
        debug_dirs: a.debug_dir.clone(),
        built_library: a.built_lib.clone(),
        close_rebuild: a.close_rebuild,
        queries,
        description: a.provenance.clone(),
    })?;
    let out = match (&a.out, &a.out_dir) {
        (Some(file), _) => file.clone(),
        (None, dir) => {
            let dir = match dir {
                Some(d) => d.clone(),
                None => mqs_core::cache_dir::cache_root()
                    .ok_or_else(|| Error::Usage("no HOME: give --out or --out-dir".into()))?
                    .join("typepacks"),
            };
            std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
            let stem = pack.library.split(".so").next().unwrap_or(&pack.library);
            dir.join(format!(
                "{stem}-{}.json",
                &pack.build_id[..pack.build_id.len().min(12)]
            ))
        }
    };
    pack.save(&out)?;
    println!(
        "{}: {} types, {} symbols, {} functions for {} (build-id {})",
        out.display(),
        pack.types.len(),
        pack.symbols.len(),
        pack.functions.len(),
        pack.library,
        pack.build_id
    );
    if let Some(r) = &pack.provenance.rebuilt {
        println!("{}", r.statement);
    }
    Ok(())
}

fn run_check(a: &CheckArgs) -> Result<(), Error> {
    let report = check::check(&CheckOptions {
        library: a.lib.clone(),
        debug_file: a.debug_file.clone(),
        debug_dirs: a.debug_dir.clone(),
        packs: a.typepack.clone(),
    })?;
    println!("{}: good for {}", report.pack.display(), a.lib.display());
    for line in report.lines {
        println!("  {line}");
    }
    Ok(())
}

fn run_queries(a: &QueriesArgs) -> Result<(), Error> {
    let paths: Vec<&std::path::Path> = a.snapshot.iter().map(PathBuf::as_path).collect();
    let mut q = Queries::from_snapshots(&paths)?;
    q.description = "names message-queue DLLs looked up (mqs-dump typepack queries)".into();
    let text = serde_json::to_string_pretty(&q).map_err(|e| Error::Usage(e.to_string()))?;
    println!("{text}");
    Ok(())
}
