//! Debian 13's stock MPIs in a root of their own, run as in a container.
//!
//! `scripts/setup-mpis` makes the root (`<cache>/debian13-root`: Debian 13
//! by debootstrap, with its `openmpi-bin`, `mpich`, their -dev packages and
//! gcc). A job of [`Mpi::Debian13OpenMpi`] or [`Mpi::Debian13Mpich`] runs in
//! a mount namespace of its own whose root is that tree (bind-mounted and
//! made the root with pivot_root, as container runtimes do): the kernel then
//! names the files its ranks map by their paths in the root
//! (`/usr/lib/x86_64-linux-gnu/libmpi.so.40.40.7`), which this machine does
//! not have or has as other files, and mqs-dump, on this machine, must read
//! them through the ranks' own root. The namespace ends with the job's last
//! process, its mounts with it: nothing is left to undo.
//!
//! Fixtures are compiled in the root (`chroot`) with its own `mpicc`, into
//! `/opt/mqs-fixtures/<mpi>/` there.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::mpi::cache_root;
use crate::{Error, Mpi, Result};

/// The root's directory in the cache, and the stamp `setup-mpis` writes in
/// it last.
const ROOT_DIR: &str = "debian13-root";
const COMPLETE_STAMP: &str = ".mqs-complete";

/// Where the fixtures are compiled to, in the root.
const FIXTURES_IN_ROOT: &str = "/opt/mqs-fixtures";

/// Run by `sh` in the new mount namespace (`unshare --mount`, whose mounts
/// are private): `$1` is the root, the rest the command to run in it. The
/// root is bind-mounted on itself (pivot_root wants a mount point), given
/// /proc, /dev, /sys and a /tmp of its own, made the root, and the old root
/// unmounted, so that nothing of this machine's tree stays visible.
const ENTER_ROOT: &str = r#"set -e
root=$1; shift
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t tmpfs tmpfs "$root/tmp"
cd "$root"
mkdir -p .mqs-old-root
/usr/sbin/pivot_root . .mqs-old-root
cd /
umount -l /.mqs-old-root
exec "$@"
"#;

/// The Debian 13 root, once `setup-mpis` finished it.
pub fn root() -> Result<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    root_with(&var).map_err(|reason| Error::StockMissing {
        mpi: "debian13-root",
        reason,
    })
}

/// [`root`] with the environment given as a function.
pub(crate) fn root_with(
    var: &dyn Fn(&str) -> Option<OsString>,
) -> std::result::Result<PathBuf, String> {
    let root = cache_root(var)?.join(ROOT_DIR);
    if !root.join(COMPLETE_STAMP).is_file() {
        return Err(format!(
            "{} is missing or unfinished (no {COMPLETE_STAMP}): run scripts/setup-mpis (as root)",
            root.display()
        ));
    }
    Ok(root)
}

/// Where `path`, a path in the root, is on this machine.
pub fn host_path(root: &Path, path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The command that runs `program args...` (paths in the root) in a mount
/// namespace whose root is the Debian 13 root.
pub fn command_in_root(program: impl AsRef<Path>) -> Result<Command> {
    let root = root()?;
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--", "/bin/sh", "-c", ENTER_ROOT, "sh"])
        .arg(&root)
        .arg(program.as_ref());
    Ok(cmd)
}

fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Compiles fixture source `src` (named `name`) with `mpi`'s compiler
/// wrapper, in the root; returns the program's path in the root. As
/// [`crate::build_fixture`]: rebuilt only when the source or the root is
/// newer, safe from concurrent tests (a private name, then a rename).
pub(crate) fn build_fixture(mpi: Mpi, name: &str, src: &Path, compiler: &Path) -> Result<PathBuf> {
    let root = root()?;
    let dir = Path::new(FIXTURES_IN_ROOT).join(mpi.name());
    let out = dir.join(name);
    let host_out = host_path(&root, &out);
    let newest = [src.to_path_buf(), root.join(COMPLETE_STAMP)]
        .iter()
        .filter_map(|p| mtime(p))
        .max();
    if let (Some(built), Some(newest)) = (mtime(&host_out), newest) {
        if built >= newest {
            return Ok(out);
        }
    }
    let host_dir = host_path(&root, &dir);
    fs::create_dir_all(&host_dir)
        .map_err(|e| Error::io(format!("creating {}", host_dir.display()), e))?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        "{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let ext = src.extension().and_then(|e| e.to_str()).unwrap_or("c");
    let src_in_root = dir.join(format!(".{name}.{unique}.{ext}"));
    let tmp = dir.join(format!(".{name}.{unique}.tmp"));
    fs::copy(src, host_path(&root, &src_in_root))
        .map_err(|e| Error::io(format!("copying {} into the root", src.display()), e))?;
    let output = Command::new("chroot")
        .arg(&root)
        .arg(compiler)
        .args(["-g", "-O0", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&tmp)
        .arg(&src_in_root)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|e| Error::io(format!("running chroot {}", root.display()), e))?;
    let _ = fs::remove_file(host_path(&root, &src_in_root));
    if !output.status.success() {
        let _ = fs::remove_file(host_path(&root, &tmp));
        return Err(Error::Build {
            source_file: src.to_path_buf(),
            mpicc: compiler.to_path_buf(),
            status: output.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    fs::rename(host_path(&root, &tmp), &host_out)
        .map_err(|e| Error::io(format!("renaming into {}", host_out.display()), e))?;
    Ok(out)
}
