//! A process's state as the debugger keeps it for us, and the steps every
//! entry point that takes a process shares: reaching the state with the
//! process's callbacks, and making sure its image was checked.

use crate::abi;
use crate::backend::{ImageBackend, ImageState};
use crate::callbacks::{self, Basic, ImageCallbacks, ProcessCallbacks};
use crate::errors::DllError;
use crate::iteration::{Debugged, ProcessState};

/// The image of a process, its table and backend (checking it if the
/// debugger has not).
pub(crate) fn image_of(
    pc: &ProcessCallbacks,
) -> Result<(ImageCallbacks, Option<ImageBackend>), DllError> {
    let image = pc.image().ok_or(DllError::NoImageInfo)?;
    callbacks::with_image_state::<ImageState, _>(image, |st| {
        let ic = ImageCallbacks::new(image, st.table);
        let backend = st.check(&ic).ok();
        (ic, backend)
    })
}

/// Runs `f` on a process's state with its callbacks, then passes any
/// queued debug lines to the debugger's dprints.
pub(crate) fn with_process<R>(
    process: *mut abi::mqs_process,
    f: impl FnOnce(&mut Debugged, &ProcessCallbacks) -> R,
) -> Result<R, DllError> {
    let (r, lines) = callbacks::with_process_state::<ProcessState, _>(process, |st| {
        let st = st.get();
        let pc = ProcessCallbacks::new(process, st.table());
        let r = f(st, &pc);
        (r, st.take_dprints())
    })?;
    if !lines.is_empty() {
        if let Ok(basic) = Basic::get() {
            for line in lines {
                basic.dprints(&line);
            }
        }
    }
    Ok(r)
}

/// Makes sure the process's symbols were looked up (a debugger may skip
/// `mqs_process_has_queues`).
pub(crate) fn ensure_checked(st: &mut Debugged, pc: &ProcessCallbacks) -> Result<(), DllError> {
    if st.is_checked() {
        return Ok(());
    }
    let (ic, _) = image_of(pc)?;
    st.check(&ic, pc).map_err(|f| f.code)
}
