//! Where the MPIs are, and compiling fixtures with them.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::error::{Error, Result};

/// The MPI builds the tests run against (see `scripts/setup-mpis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mpi {
    /// Open MPI 4.1.4 built with `-g` everywhere.
    OpenMpiG,
    /// Open MPI 4.1.4 with default flags: DWARF only in `ompi/debuggers`.
    OpenMpiRelease,
    /// MPICH 4.0.2, ch3:nemesis, `--enable-debuginfo`.
    Mpich,
    /// MPICH 4.0.2, ch4:ofi without shared-memory modules,
    /// `--enable-debuginfo`: every message goes through libfabric.
    MpichCh4,
    /// Open MPI 5.0.7 built with `-g` everywhere.
    OpenMpi5G,
    /// Open MPI 5.0.7 with default flags: DWARF only in `ompi/debuggers`.
    OpenMpi5Release,
    /// Open MPI 4.1.4 `-g` under `pml ucx`: the same build as
    /// [`Mpi::OpenMpiG`], which links UCX (the cache's `ucx-1.13.1-g`,
    /// `-g`), run with [`crate::PML_UCX_ENV`].
    OpenMpiUcx,
    /// Open MPI 5.0.7 `-g` under `pml ucx`: the same build as
    /// [`Mpi::OpenMpi5G`].
    OpenMpi5Ucx,
    /// MPICH 4.0.2 built like [`Mpi::MpichCh4`], but with the ch4 `ucx`
    /// netmod over the same UCX (Debian's own MPICH is ch4:ucx): no
    /// shared-memory module, so every message goes through UCX.
    MpichUcx,
    /// Debian 12's own Open MPI (`openmpi-bin`/`libopenmpi3`/`libopenmpi-dev`
    /// 4.1.4-3+b1, installed under /usr by `setup-mpis`): stripped, its DWARF
    /// only in a -dbgsym package.
    DebianOpenMpi,
    /// Debian 12's own MPICH (`mpich`/`libmpich-dev` 4.0.2-3+b1): ch4,
    /// built without `--enable-debuginfo`.
    DebianMpich,
    /// Debian 13's own Open MPI (`libopenmpi40` 5.0.7-1, its components
    /// built into libmpi), in the Debian 13 root `setup-mpis` makes: its
    /// jobs run in a mount namespace whose root that is, as a container's
    /// (see [`crate::debian13`]).
    Debian13OpenMpi,
    /// Debian 13's own MPICH (`libmpich12` 4.3.0+really4.2.1-1: MPICH 4.2.1,
    /// ch4, without `--enable-debuginfo`), in the same root.
    Debian13Mpich,
}

/// Which implementation an [`Mpi`] is, for what differs between them (the
/// launcher, its options, the DLL's internals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    OpenMpi,
    Mpich,
}

/// The file `setup-mpis` writes last, so a prefix without it is unfinished.
const COMPLETE_STAMP: &str = ".mqs-complete";

impl Mpi {
    /// The name tests and messages call this MPI by; for a build of the
    /// cache, [`Mpi::build`] names its directory.
    pub const fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpiG => "openmpi-4.1.4-g",
            Mpi::OpenMpiRelease => "openmpi-4.1.4-release",
            Mpi::Mpich => "mpich-4.0.2-g",
            Mpi::MpichCh4 => "mpich-4.0.2-ch4",
            Mpi::OpenMpi5G => "openmpi-5.0.7-g",
            Mpi::OpenMpi5Release => "openmpi-5.0.7-release",
            Mpi::OpenMpiUcx => "openmpi-4.1.4-ucx",
            Mpi::OpenMpi5Ucx => "openmpi-5.0.7-ucx",
            Mpi::MpichUcx => "mpich-4.0.2-ucx",
            Mpi::DebianOpenMpi => "debian-openmpi-4.1.4-3+b1",
            Mpi::DebianMpich => "debian-mpich-4.0.2-3+b1",
            Mpi::Debian13OpenMpi => "debian13-openmpi-5.0.7-1",
            Mpi::Debian13Mpich => "debian13-mpich-4.2.1",
        }
    }

    /// The cache directory name `setup-mpis` gives this MPI's build: one
    /// Open MPI build per version serves ob1 and `pml ucx` (a PML is
    /// chosen when the job starts), which keeps the first run short.
    pub const fn build(self) -> &'static str {
        match self {
            Mpi::OpenMpiUcx => Mpi::OpenMpiG.name(),
            Mpi::OpenMpi5Ucx => Mpi::OpenMpi5G.name(),
            other => other.name(),
        }
    }

    /// The MPIs `setup-mpis` builds into the cache that every fixture
    /// test runs under.
    pub const fn all() -> [Mpi; 3] {
        [Mpi::OpenMpiG, Mpi::OpenMpiRelease, Mpi::Mpich]
    }

    /// The cached MPIs only the tests written for them run under.
    pub const fn more() -> [Mpi; 6] {
        [
            Mpi::MpichCh4,
            Mpi::OpenMpi5G,
            Mpi::OpenMpi5Release,
            Mpi::OpenMpiUcx,
            Mpi::OpenMpi5Ucx,
            Mpi::MpichUcx,
        ]
    }

    /// Debian's own binary MPIs, as users have them.
    pub const fn stock() -> [Mpi; 2] {
        [Mpi::DebianOpenMpi, Mpi::DebianMpich]
    }

    pub const fn family(self) -> Family {
        match self {
            Mpi::OpenMpiG
            | Mpi::OpenMpiRelease
            | Mpi::OpenMpi5G
            | Mpi::OpenMpi5Release
            | Mpi::OpenMpiUcx
            | Mpi::OpenMpi5Ucx
            | Mpi::DebianOpenMpi
            | Mpi::Debian13OpenMpi => Family::OpenMpi,
            Mpi::Mpich | Mpi::MpichCh4 | Mpi::MpichUcx | Mpi::DebianMpich | Mpi::Debian13Mpich => {
                Family::Mpich
            }
        }
    }

    /// Open MPI 5: PRRTE's launcher (`prterun`, no MPIR), the `sm` BTL,
    /// `c_index` and 128-bit context ids.
    pub const fn is_open_mpi_5(self) -> bool {
        matches!(
            self,
            Mpi::OpenMpi5G | Mpi::OpenMpi5Release | Mpi::OpenMpi5Ucx | Mpi::Debian13OpenMpi
        )
    }

    /// Whether its jobs run in the Debian 13 root (paths of its files are
    /// in that root, not on this machine).
    pub const fn in_debian13_root(self) -> bool {
        matches!(self, Mpi::Debian13OpenMpi | Mpi::Debian13Mpich)
    }

    /// Whether this is a distribution's binary package.
    pub const fn is_stock(self) -> bool {
        matches!(
            self,
            Mpi::DebianOpenMpi | Mpi::DebianMpich | Mpi::Debian13OpenMpi | Mpi::Debian13Mpich
        )
    }

    /// For a stock MPI: its compiler wrapper, launcher and one header the
    /// -dev package installs (Debian suffixes the names by implementation).
    const fn stock_files(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Mpi::DebianOpenMpi => Some((
                "/usr/bin/mpicc.openmpi",
                "/usr/bin/mpirun.openmpi",
                "/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h",
            )),
            Mpi::DebianMpich | Mpi::Debian13Mpich => Some((
                "/usr/bin/mpicc.mpich",
                "/usr/bin/mpiexec.mpich",
                "/usr/include/x86_64-linux-gnu/mpich/mpi.h",
            )),
            Mpi::Debian13OpenMpi => Some((
                "/usr/bin/mpicc.openmpi",
                "/usr/bin/mpirun.openmpi",
                "/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h",
            )),
            _ => None,
        }
    }

    /// The directory of the stock MPI's libraries and components.
    pub fn stock_libdir(self) -> Option<PathBuf> {
        match self {
            Mpi::DebianOpenMpi | Mpi::DebianMpich => {
                Some(PathBuf::from("/usr/lib/x86_64-linux-gnu"))
            }
            _ => None,
        }
    }

    /// The variable that overrides the prefix, for testing an MPI installed
    /// elsewhere.
    pub const fn prefix_env_var(self) -> &'static str {
        match self {
            Mpi::OpenMpiG => "MQS_OPENMPI_G_PREFIX",
            Mpi::OpenMpiRelease => "MQS_OPENMPI_RELEASE_PREFIX",
            Mpi::Mpich => "MQS_MPICH_PREFIX",
            Mpi::MpichCh4 => "MQS_MPICH_CH4_PREFIX",
            Mpi::OpenMpi5G => "MQS_OPENMPI5_G_PREFIX",
            Mpi::OpenMpi5Release => "MQS_OPENMPI5_RELEASE_PREFIX",
            // The same builds as the -g ones.
            Mpi::OpenMpiUcx => "MQS_OPENMPI_G_PREFIX",
            Mpi::OpenMpi5Ucx => "MQS_OPENMPI5_G_PREFIX",
            Mpi::MpichUcx => "MQS_MPICH_UCX_PREFIX",
            // Installed by Debian's packages under /usr: no override.
            Mpi::DebianOpenMpi | Mpi::DebianMpich | Mpi::Debian13OpenMpi | Mpi::Debian13Mpich => "",
        }
    }

    /// The installation prefix, from the override variable or the cache.
    pub fn prefix(self) -> Result<PathBuf> {
        self.prefix_with(|k| std::env::var_os(k))
    }

    /// [`Mpi::prefix`] with the environment given as a function, so the
    /// lookup rules can be tested without touching the process environment.
    pub fn prefix_with(self, env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf> {
        // Empty counts as unset, as `${VAR:-default}` does in setup-mpis.
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        let missing = |reason: String| Error::MpiMissing {
            mpi: self.name(),
            env_var: self.prefix_env_var(),
            reason,
        };
        if self.in_debian13_root() {
            let root = crate::debian13::root_with(&var).map_err(|reason| Error::StockMissing {
                mpi: self.name(),
                reason,
            })?;
            if let Some(files) = self.stock_files() {
                for f in [files.0, files.1, files.2] {
                    if !crate::debian13::host_path(&root, f).is_file() {
                        return Err(Error::StockMissing {
                            mpi: self.name(),
                            reason: format!("{f} is missing in {}", root.display()),
                        });
                    }
                }
            }
            return Ok(PathBuf::from("/usr"));
        }
        if let Some(files) = self.stock_files() {
            for f in [files.0, files.1, files.2] {
                if !Path::new(f).is_file() {
                    return Err(Error::StockMissing {
                        mpi: self.name(),
                        reason: format!("{f} is missing"),
                    });
                }
            }
            return Ok(PathBuf::from("/usr"));
        }
        if let Some(p) = var(self.prefix_env_var()) {
            let p = PathBuf::from(p);
            if !p.join("bin/mpicc").is_file() {
                return Err(missing(format!(
                    "{}={} has no bin/mpicc",
                    self.prefix_env_var(),
                    p.display()
                )));
            }
            return Ok(p);
        }
        let cache = cache_root(&var).map_err(missing)?;
        let prefix = cache.join(self.build());
        if !prefix.join(COMPLETE_STAMP).is_file() {
            return Err(missing(format!(
                "{} is missing or unfinished (no {COMPLETE_STAMP})",
                prefix.display()
            )));
        }
        Ok(prefix)
    }

    /// The C compiler wrapper.
    pub fn mpicc(self) -> Result<PathBuf> {
        if let Some((mpicc, ..)) = self.stock_files() {
            self.prefix()?;
            return Ok(PathBuf::from(mpicc));
        }
        Ok(self.prefix()?.join("bin/mpicc"))
    }

    /// The C++ compiler wrapper (Debian suffixes it as it does `mpicc`).
    pub fn mpicxx(self) -> Result<PathBuf> {
        let mpicc = self.mpicc()?;
        let name = mpicc
            .file_name()
            .map(|n| n.to_string_lossy().replacen("mpicc", "mpicxx", 1))
            .unwrap_or_default();
        Ok(mpicc.with_file_name(name))
    }

    /// The job launcher: Open MPI's `mpirun`, MPICH's hydra `mpiexec`.
    pub fn launcher(self) -> Result<PathBuf> {
        let bin = match self.family() {
            Family::OpenMpi => "bin/mpirun",
            Family::Mpich => "bin/mpiexec",
        };
        let path = match self.stock_files() {
            Some((_, launcher, _)) => {
                self.prefix()?;
                PathBuf::from(launcher)
            }
            None => self.prefix()?.join(bin),
        };
        // A launcher in the Debian 13 root is checked there (by prefix()).
        if !path.is_file() && !self.in_debian13_root() {
            return Err(Error::MpiMissing {
                mpi: self.name(),
                env_var: self.prefix_env_var(),
                reason: format!("{} does not exist", path.display()),
            });
        }
        Ok(path)
    }
}

impl fmt::Display for Mpi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The cache `setup-mpis` builds into: `MQS_CACHE`, else
/// `$XDG_CACHE_HOME/mqs`, else `~/.cache/mqs` (as the script says).
pub(crate) fn cache_root(
    var: &dyn Fn(&str) -> Option<OsString>,
) -> std::result::Result<PathBuf, String> {
    match (var("MQS_CACHE"), var("XDG_CACHE_HOME"), var("HOME")) {
        (Some(c), _, _) => Ok(PathBuf::from(c)),
        (None, Some(x), _) => Ok(PathBuf::from(x).join("mqs")),
        (None, None, Some(h)) => Ok(PathBuf::from(h).join(".cache/mqs")),
        (None, None, None) => Err("none of MQS_CACHE, XDG_CACHE_HOME, HOME is set".into()),
    }
}

/// An MPI from PyPI that `setup-mpis` installs into a virtual environment
/// of the cache (`pypi-impi`: Intel MPI's `impi-rt` wheel with mpi4py):
/// its directory, once finished.
pub fn pypi_env(name: &'static str) -> Result<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let missing = |reason: String| Error::MpiMissing {
        mpi: name,
        env_var: "",
        reason,
    };
    let env = cache_root(&var).map_err(missing)?.join(name);
    if !env.join(COMPLETE_STAMP).is_file() {
        return Err(missing(format!(
            "{} is missing or unfinished (no {COMPLETE_STAMP})",
            env.display()
        )));
    }
    Ok(env)
}

/// The repository root (this crate lives in its `tests/` directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set (at run time or when
/// this crate was built), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    let configured = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|v| !v.is_empty())
        .or_else(|| option_env!("CARGO_TARGET_DIR").map(OsString::from))
        .filter(|v| !v.is_empty());
    match configured {
        // Cargo resolves a relative target dir against where it was run; the
        // workspace root is the usual place and the only one we can know.
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// The directory holding the fixture sources.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The source file of fixture `name`, if it exists.
pub fn fixture_source(name: &str) -> Result<PathBuf> {
    // A name is a file stem; refuse paths so nothing outside fixtures/ is built.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(Error::NoFixture(name.to_string()));
    }
    // C fixtures, and C++ ones (`.cpp`) for what only C++ shows (mangled
    // names).
    ["c", "cpp"]
        .iter()
        .map(|ext| fixtures_dir().join(format!("{name}.{ext}")))
        .find(|src| src.is_file())
        .ok_or_else(|| Error::NoFixture(name.to_string()))
}

fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Compile fixture `name` with `mpi`'s `mpicc` into
/// `<target>/mqs-fixtures/<mpi>/<name>` and return that path.
///
/// Rebuilds only when the source (or the MPI installation) is newer than the
/// binary. Safe to call from concurrent tests and processes: each compiles to
/// a private temporary name and renames it into place.
pub fn build_fixture(mpi: Mpi, name: &str) -> Result<PathBuf> {
    let src = fixture_source(name)?;
    let prefix = mpi.prefix()?;
    let mpicc = if src.extension().is_some_and(|e| e == "cpp") {
        mpi.mpicxx()?
    } else {
        mpi.mpicc()?
    };
    if mpi.in_debian13_root() {
        return crate::debian13::build_fixture(mpi, name, &src, &mpicc);
    }
    let out_dir = target_dir().join("mqs-fixtures").join(mpi.build());
    let out = out_dir.join(name);

    // A rebuilt MPI (new stamp) may have a different ABI: rebuild against it.
    let inputs = [src.clone(), prefix.join(COMPLETE_STAMP), mpicc.clone()];
    let newest_input = inputs.iter().filter_map(|p| mtime(p)).max();
    if let (Some(built), Some(newest)) = (mtime(&out), newest_input) {
        if built >= newest {
            return Ok(out);
        }
    }

    fs::create_dir_all(&out_dir)
        .map_err(|e| Error::io(format!("creating {}", out_dir.display()), e))?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = out_dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let output = Command::new(&mpicc)
        .args(["-g", "-O0", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| Error::io(format!("running {}", mpicc.display()), e))?;
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(Error::Build {
            source_file: src,
            mpicc,
            status: output.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    fs::rename(&tmp, &out).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(
            format!("renaming {} to {}", tmp.display(), out.display()),
            e,
        )
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mqs-tests-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn names_are_the_cache_names() {
        let names: Vec<_> = Mpi::all()
            .iter()
            .chain(&Mpi::more())
            .map(|m| m.name())
            .collect();
        assert_eq!(
            names,
            [
                "openmpi-4.1.4-g",
                "openmpi-4.1.4-release",
                "mpich-4.0.2-g",
                "mpich-4.0.2-ch4",
                "openmpi-5.0.7-g",
                "openmpi-5.0.7-release",
                "openmpi-4.1.4-ucx",
                "openmpi-5.0.7-ucx",
                "mpich-4.0.2-ucx"
            ]
        );
        // One Open MPI build per version serves ob1 and pml ucx.
        assert_eq!(Mpi::OpenMpiUcx.build(), "openmpi-4.1.4-g");
        assert_eq!(Mpi::OpenMpi5Ucx.build(), "openmpi-5.0.7-g");
        assert_eq!(Mpi::MpichUcx.build(), "mpich-4.0.2-ucx");
    }

    #[test]
    fn missing_mpi_says_how_to_build_it() {
        let dir = scratch("missing");
        let env = env_of(&[("MQS_CACHE", dir.to_str().unwrap())]);
        for mpi in Mpi::all().into_iter().chain(Mpi::more()) {
            let err = mpi.prefix_with(&env).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("scripts/setup-mpis"), "{msg}");
            assert!(msg.contains(mpi.prefix_env_var()), "{msg}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unfinished_prefix_is_missing() {
        let dir = scratch("unfinished");
        fs::create_dir_all(dir.join("mpich-4.0.2-g/bin")).unwrap();
        let env = env_of(&[("MQS_CACHE", dir.to_str().unwrap())]);
        assert!(matches!(
            Mpi::Mpich.prefix_with(&env),
            Err(Error::MpiMissing { .. })
        ));
        fs::write(dir.join("mpich-4.0.2-g").join(COMPLETE_STAMP), "x").unwrap();
        assert_eq!(
            Mpi::Mpich.prefix_with(&env).unwrap(),
            dir.join("mpich-4.0.2-g")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cache_falls_back_to_xdg_then_home() {
        let dir = scratch("fallback");
        fs::create_dir_all(dir.join("xdg/mqs/mpich-4.0.2-g")).unwrap();
        fs::write(dir.join("xdg/mqs/mpich-4.0.2-g").join(COMPLETE_STAMP), "").unwrap();
        fs::create_dir_all(dir.join("home/.cache/mqs/mpich-4.0.2-g")).unwrap();
        fs::write(
            dir.join("home/.cache/mqs/mpich-4.0.2-g")
                .join(COMPLETE_STAMP),
            "",
        )
        .unwrap();
        let xdg = dir.join("xdg");
        let home = dir.join("home");
        let env = env_of(&[
            ("MQS_CACHE", ""),
            ("XDG_CACHE_HOME", xdg.to_str().unwrap()),
            ("HOME", home.to_str().unwrap()),
        ]);
        assert_eq!(
            Mpi::Mpich.prefix_with(&env).unwrap(),
            xdg.join("mqs/mpich-4.0.2-g")
        );
        let env = env_of(&[("HOME", home.to_str().unwrap())]);
        assert_eq!(
            Mpi::Mpich.prefix_with(&env).unwrap(),
            home.join(".cache/mqs/mpich-4.0.2-g")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn override_needs_mpicc_and_skips_the_stamp() {
        let dir = scratch("override");
        let env = env_of(&[("MQS_OPENMPI_G_PREFIX", dir.to_str().unwrap())]);
        let msg = Mpi::OpenMpiG.prefix_with(&env).unwrap_err().to_string();
        assert!(msg.contains("has no bin/mpicc"), "{msg}");
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::write(dir.join("bin/mpicc"), "").unwrap();
        assert_eq!(Mpi::OpenMpiG.prefix_with(&env).unwrap(), dir);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fixture_names_are_not_paths() {
        assert!(fixture_source("queues").is_ok());
        assert!(matches!(
            fixture_source("../src/lib"),
            Err(Error::NoFixture(_))
        ));
        assert!(matches!(fixture_source("nope"), Err(Error::NoFixture(_))));
    }
}
