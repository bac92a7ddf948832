//! How every command that reads queues reads a process: which
//! message-queue DLL (`--dll`, `--trust-dll`), and where types come from
//! besides the MPI's own DWARF (`--debug-dir`, `--typepack`, `--offline`).

use std::path::PathBuf;

use clap::Args;
use mqs_acquire::inspect::{DllChoice, Options};

use crate::error::Error;

/// The file name of mqs's own DLL, installed beside mqs-dump.
const OURS: &str = "libmqs_dll.so";

#[derive(Debug, Clone, Args)]
pub struct ReadArgs {
    /// The message-queue DLL that reads the processes: `ours` (mqs's own,
    /// installed beside mqs-dump), `mpi` (the one the MPI names in
    /// MPIR_dll_name), or a path. Default: ours where it reads the MPI, else
    /// the MPI's; the output says which was used.
    #[arg(long, value_name = "ours|mpi|PATH")]
    pub dll: Option<PathBuf>,

    /// Load the DLL the process names even if it is not owned by root or
    /// you, or is writable by others.
    #[arg(long)]
    pub trust_dll: bool,

    /// Also look for separate debug files here (repeatable); /usr/lib/debug
    /// is always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    #[command(flatten)]
    pub types: crate::typepack::TypeSourceArgs,
}

impl ReadArgs {
    /// The dump options these make; the rest as their defaults.
    pub fn options(&self) -> Result<Options, Error> {
        Ok(Options {
            dll: self.choice()?,
            trust_dll: self.trust_dll,
            debug_dirs: self.debug_dir.clone(),
            typepack_dirs: self.types.typepack.clone(),
            offline: self.types.offline,
            ..Options::default()
        })
    }

    /// What `--dll` asks for (a file named `ours` or `mpi` is given as
    /// `./ours`).
    pub fn choice(&self) -> Result<DllChoice, Error> {
        let ours = || {
            std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|dir| dir.join(OURS)))
                .unwrap_or_else(|| PathBuf::from(OURS))
        };
        Ok(match self.dll.as_deref().and_then(|p| p.to_str()) {
            None if self.dll.is_none() => DllChoice::PreferOurs(ours()),
            Some("mpi") => DllChoice::Named,
            Some("ours") => {
                let path = ours();
                if !path.exists() {
                    return Err(mqs_core::Error::DllMissing {
                        path,
                        detail: "mqs's own DLL is not installed beside mqs-dump; build it \
                                 (cargo build -p mqs-dll) or give its path with --dll PATH"
                            .into(),
                    }
                    .into());
                }
                DllChoice::Given(path)
            }
            _ => DllChoice::Given(self.dll.clone().unwrap_or_default()),
        })
    }
}
