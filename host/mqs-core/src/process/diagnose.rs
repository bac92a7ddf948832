//! Why the kernel refused access to a process, in terms a user can act on.
//!
//! The kernel only says EPERM/EACCES; we look at the same facts it did
//! (tracer, uids, capabilities, Yama) and name the first that explains it.

use nix::errno::Errno;

use super::procfs::{self, CAP_SYS_PTRACE};
use crate::{Error, PermissionReason};

/// The facts the kernel's ptrace access check looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Facts {
    /// TracerPid of the target and that tracer's name, if traced.
    pub tracer: Option<(i32, String)>,
    pub our_uid: u32,
    pub our_euid: u32,
    pub our_gid: u32,
    pub cap_sys_ptrace: bool,
    /// Real, effective, saved.
    pub target_uids: [u32; 3],
    pub target_gids: [u32; 3],
    pub yama_scope: Option<u32>,
    pub target_is_descendant: bool,
}

/// The error for a refused access to `pid`, or the process's absence if that
/// is what the refusal really was.
pub(crate) fn permission_error(pid: i32, errno: Errno) -> Error {
    if pid == std::process::id() as i32 {
        return Error::PermissionDenied {
            pid,
            reason: PermissionReason::Other("a process cannot trace itself".into()),
        };
    }
    match gather(pid) {
        Some(facts) => Error::PermissionDenied {
            pid,
            reason: classify(&facts, errno),
        },
        None => Error::ProcessGone { pid },
    }
}

fn gather(pid: i32) -> Option<Facts> {
    let target = procfs::status(pid).ok()?;
    let ours = procfs::status(std::process::id() as i32).ok()?;
    let tracer = (target.tracer_pid != 0).then(|| {
        let name = procfs::comm(target.tracer_pid).unwrap_or_else(|| "?".to_owned());
        (target.tracer_pid, name)
    });
    Some(Facts {
        tracer,
        our_uid: ours.uids[0],
        our_euid: ours.uids[1],
        our_gid: ours.gids[0],
        cap_sys_ptrace: ours.cap_eff & (1 << CAP_SYS_PTRACE) != 0,
        target_uids: [target.uids[0], target.uids[1], target.uids[2]],
        target_gids: [target.gids[0], target.gids[1], target.gids[2]],
        yama_scope: procfs::yama_scope(),
        target_is_descendant: is_descendant(target.ppid),
    })
}

/// Whether a process whose parent is `ppid` descends from us (Yama scope 1
/// lets us trace our descendants).
fn is_descendant(mut ppid: i32) -> bool {
    let me = std::process::id() as i32;
    // Bounded: a parent chain cannot be longer than the pid space, but a
    // racing reparent must not loop us forever.
    for _ in 0..4096 {
        if ppid == me {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        match procfs::status(ppid) {
            Ok(s) => ppid = s.ppid,
            Err(_) => return false,
        }
    }
    false
}

/// The first fact that explains the refusal, in the order a user should fix
/// them.
pub(crate) fn classify(f: &Facts, errno: Errno) -> PermissionReason {
    if let Some((tracer_pid, tracer_name)) = &f.tracer {
        return PermissionReason::AlreadyTraced {
            tracer_pid: *tracer_pid,
            tracer_name: tracer_name.clone(),
        };
    }
    // The kernel lets a caller whose real uid matches every target uid in;
    // otherwise only CAP_SYS_PTRACE does.
    let foreign = f.target_uids.iter().find(|&&u| u != f.our_uid);
    if let (Some(&target_uid), false) = (foreign, f.cap_sys_ptrace) {
        return if f.our_euid == 0 {
            PermissionReason::NoCapSysPtrace
        } else {
            PermissionReason::NotRoot { target_uid }
        };
    }
    match f.yama_scope {
        Some(scope @ 3..) => return PermissionReason::PtraceScope(scope),
        Some(2) if !f.cap_sys_ptrace => return PermissionReason::PtraceScope(2),
        Some(1) if !f.cap_sys_ptrace && !f.target_is_descendant => {
            return PermissionReason::PtraceScope(1)
        }
        _ => {}
    }
    if f.our_euid == 0 && !f.cap_sys_ptrace {
        return PermissionReason::NoCapSysPtrace;
    }
    if !f.cap_sys_ptrace && f.target_gids.iter().any(|&g| g != f.our_gid) {
        return PermissionReason::Other(format!(
            "its group ids {:?} differ from ours ({}); run as root",
            f.target_gids, f.our_gid
        ));
    }
    PermissionReason::Other(format!(
        "{errno} (it may be marked not dumpable, e.g. a setuid program)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Facts {
        Facts {
            tracer: None,
            our_uid: 0,
            our_euid: 0,
            our_gid: 0,
            cap_sys_ptrace: true,
            target_uids: [1000; 3],
            target_gids: [1000; 3],
            yama_scope: None,
            target_is_descendant: false,
        }
    }

    fn user() -> Facts {
        Facts {
            our_uid: 1000,
            our_euid: 1000,
            our_gid: 1000,
            cap_sys_ptrace: false,
            ..root()
        }
    }

    #[test]
    fn tracer_comes_first() {
        let f = Facts {
            tracer: Some((77, "gdb".into())),
            target_uids: [0; 3],
            ..user()
        };
        assert_eq!(
            classify(&f, Errno::EPERM),
            PermissionReason::AlreadyTraced {
                tracer_pid: 77,
                tracer_name: "gdb".into()
            }
        );
    }

    #[test]
    fn other_users_process() {
        let f = Facts {
            target_uids: [0, 0, 0],
            ..user()
        };
        assert_eq!(
            classify(&f, Errno::EPERM),
            PermissionReason::NotRoot { target_uid: 0 }
        );
        // A setuid target: the real uid is ours, the effective one is not.
        let f = Facts {
            target_uids: [1000, 0, 0],
            ..user()
        };
        assert_eq!(
            classify(&f, Errno::EPERM),
            PermissionReason::NotRoot { target_uid: 0 }
        );
    }

    #[test]
    fn yama_scopes() {
        let own = Facts {
            yama_scope: Some(1),
            ..user()
        };
        assert_eq!(
            classify(&own, Errno::EPERM),
            PermissionReason::PtraceScope(1)
        );
        let child = Facts {
            target_is_descendant: true,
            ..own.clone()
        };
        assert!(matches!(
            classify(&child, Errno::EPERM),
            PermissionReason::Other(_)
        ));
        let admin = Facts {
            yama_scope: Some(2),
            ..child
        };
        assert_eq!(
            classify(&admin, Errno::EPERM),
            PermissionReason::PtraceScope(2)
        );
        // Scope 3 forbids even root.
        let none = Facts {
            yama_scope: Some(3),
            ..root()
        };
        assert_eq!(
            classify(&none, Errno::EPERM),
            PermissionReason::PtraceScope(3)
        );
        assert!(matches!(
            classify(
                &Facts {
                    yama_scope: Some(2),
                    ..root()
                },
                Errno::EPERM
            ),
            PermissionReason::Other(_)
        ));
    }

    #[test]
    fn root_without_the_capability() {
        let f = Facts {
            cap_sys_ptrace: false,
            ..root()
        };
        assert_eq!(classify(&f, Errno::EPERM), PermissionReason::NoCapSysPtrace);
        let same_uid = Facts {
            target_uids: [0; 3],
            target_gids: [0; 3],
            ..f
        };
        assert_eq!(
            classify(&same_uid, Errno::EPERM),
            PermissionReason::NoCapSysPtrace
        );
    }

    #[test]
    fn unexplained_is_other() {
        assert!(matches!(
            classify(&root(), Errno::EPERM),
            PermissionReason::Other(_)
        ));
    }

    #[test]
    fn gather_on_ourselves() {
        let f = gather(std::process::id() as i32).unwrap();
        assert_eq!(f.target_uids[0], f.our_uid);
        assert!(!f.target_is_descendant);
    }
}
