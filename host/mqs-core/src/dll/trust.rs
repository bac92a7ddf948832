//! Whether a DLL may be loaded: it runs in the host, and the target chose
//! it (`MPIR_dll_name`), so it must be a file only root or the user could
//! have written.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::{Error, Result};

/// Refuses a DLL that someone other than root or us could have written.
pub fn check_trusted(path: &Path) -> Result<()> {
    let untrusted = |detail: String| Error::DllUntrusted {
        path: path.to_path_buf(),
        detail: format!("{detail}; pass --trust-dll to load it anyway"),
    };
    let meta = std::fs::metadata(path).map_err(|e| Error::DllMissing {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if !meta.is_file() {
        return Err(untrusted("not a regular file".into()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(untrusted(format!(
            "owned by uid {}, neither root nor you (uid {me})",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(untrusted(format!(
            "writable by {} (mode {:o})",
            if mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            mode & 0o7777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    fn temp_file(mode: u32) -> (tempdir_lite::Dir, PathBuf) {
        let dir = tempdir_lite::Dir::new();
        let path = dir.path().join("libdll.so");
        fs::write(&path, b"x").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn trust_accepts_own_file_and_refuses_writable_ones() {
        let (_d, ok) = temp_file(0o755);
        check_trusted(&ok).unwrap();
        let (_d, group) = temp_file(0o775);
        let err = check_trusted(&group).unwrap_err().to_string();
        assert!(
            err.contains("its group") && err.contains("--trust-dll"),
            "{err}"
        );
        let (_d, world) = temp_file(0o757);
        let err = check_trusted(&world).unwrap_err().to_string();
        assert!(err.contains("everyone"), "{err}");
        let (d, _) = temp_file(0o644);
        let err = check_trusted(d.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn trust_refuses_other_owners() {
        let (_d, path) = temp_file(0o755);
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let err = check_trusted(&path).unwrap_err().to_string();
        assert!(err.contains("owned by uid 65534"), "{err}");
    }

    /// A minimal temporary directory, removed on drop.
    mod tempdir_lite {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicU32, Ordering};

        pub struct Dir(PathBuf);
        static NEXT: AtomicU32 = AtomicU32::new(0);

        impl Dir {
            pub fn new() -> Self {
                let path = std::env::temp_dir().join(format!(
                    "mqs-locate-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).unwrap();
                Self(path)
            }
            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
