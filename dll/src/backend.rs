//! Which MPI an image runs, and the backend that reads it.
//!
//! One DLL serves every MPI it knows: `mqs_setup_image` recognises the MPI
//! from the image's symbols (Open MPI's communicator table,
//! `ompi_mpi_communicators`; MPICH's communicator list,
//! `MPIR_All_communicators`), `mqs_image_has_queues` resolves that
//! backend's types once, and every process of the image gets that
//! backend's state. The entry points ([`crate::api`]) only see
//! [`ImageState`] and [`ProcessState`]: what is MPI-specific stays in
//! [`crate::openmpi`] and [`crate::mpich`].

use std::sync::Arc;

use mqs_abi::{Communicator, OpClass, PendingOperation, ReturnCode};

use crate::abi;
use crate::access::{ImageAccess, ProcessAccess};
use crate::callbacks::{InfoKind, ProcessCallbacks};
use crate::errors::DllError;
use crate::layout::Layout;
use crate::messages;
use crate::openmpi::groups::NameMap;
use crate::target::{ByteOrder, Sizes};
use crate::{mpich, openmpi};

pub use crate::messages::Failure;

/// The MPIs this DLL reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mpi {
    OpenMpi,
    Mpich,
}

/// Recognises the MPI from the symbol each one's debugger support always
/// has (none: not known yet, the types may still tell).
pub fn recognise<I: ImageAccess>(image: &I) -> Option<Mpi> {
    if image.find_symbol(openmpi::SYM_COMMUNICATORS).is_some() {
        Some(Mpi::OpenMpi)
    } else if image.find_symbol(mpich::SYM_ALL_COMMUNICATORS).is_some() {
        Some(Mpi::Mpich)
    } else {
        None
    }
}

/// What one image's backend resolved.
#[derive(Debug, Clone)]
pub enum ImageBackend {
    OpenMpi(Arc<Layout>),
    Mpich(Arc<mpich::layout::Layout>),
}

/// What the DLL keeps per image.
#[derive(Debug)]
pub struct ImageState {
    /// The debugger's image table, kept since `mqs_setup_image`.
    pub table: *const abi::mqs_image_callbacks,
    /// The MPI recognised at `mqs_setup_image`, if its symbols said.
    pub mpi: Option<Mpi>,
    /// Set by a successful `mqs_image_has_queues`.
    pub backend: Option<ImageBackend>,
    /// Set by a failed one.
    pub failure: Option<Failure>,
}

impl InfoKind for ImageState {
    const MAGIC: u64 = 0x6d71_735f_696d_6167; // "mqs_imag"
    const MISSING: DllError = DllError::NoImageInfo;
}

impl ImageState {
    pub fn new(table: *const abi::mqs_image_callbacks) -> Self {
        ImageState {
            table,
            mpi: None,
            backend: None,
            failure: None,
        }
    }

    /// `mqs_image_has_queues`: resolves the backend once and remembers.
    pub fn check<I: ImageAccess>(&mut self, image: &I) -> Result<ImageBackend, Failure> {
        if let Some(backend) = &self.backend {
            return Ok(backend.clone());
        }
        match check_image(image, self.mpi) {
            Ok(backend) => {
                self.backend = Some(backend.clone());
                self.failure = None;
                Ok(backend)
            }
            Err(f) => {
                self.failure = Some(f);
                Err(f)
            }
        }
    }
}

/// Resolves the backend of an image: the one its symbols named, or, when
/// they named none (a debugger that finds no symbols before the process
/// runs), whichever MPI's types are there.
pub fn check_image<I: ImageAccess>(image: &I, mpi: Option<Mpi>) -> Result<ImageBackend, Failure> {
    match mpi {
        Some(Mpi::OpenMpi) => openmpi::check_image(image).map(|l| ImageBackend::OpenMpi(l.into())),
        Some(Mpi::Mpich) => mpich::check_image(image).map(|l| ImageBackend::Mpich(l.into())),
        None => match openmpi::check_image(image) {
            Ok(l) => Ok(ImageBackend::OpenMpi(l.into())),
            Err(f) if f.code == DllError::NotOpenMpi => match mpich::check_image(image) {
                Ok(l) => Ok(ImageBackend::Mpich(l.into())),
                // Neither MPI's types nor symbols: say so for both.
                Err(_) => Err(Failure {
                    code: DllError::NotOpenMpi,
                    message: Some(messages::NOT_AN_MPI),
                }),
            },
            Err(f) => Err(f),
        },
    }
}

/// The per-process state of each backend.
#[derive(Debug)]
pub enum Backend {
    OpenMpi(openmpi::ProcessState),
    Mpich(mpich::ProcessState),
}

/// What the DLL keeps per process: its backend's state.
#[derive(Debug)]
pub struct ProcessState {
    pub backend: Backend,
}

impl InfoKind for ProcessState {
    const MAGIC: u64 = 0x6d71_735f_7072_6f63; // "mqs_proc"
    const MISSING: DllError = DllError::NoProcessInfo;
}

/// Runs the same expression on whichever backend the process has.
macro_rules! each {
    ($state:expr, $b:ident => $e:expr) => {
        match $state {
            Backend::OpenMpi($b) => $e,
            Backend::Mpich($b) => $e,
        }
    };
}

impl ProcessState {
    /// Fresh state for a process of an image with `image`'s backend.
    pub fn new(
        table: *const abi::mqs_process_callbacks,
        image: ImageBackend,
        sizes: Sizes,
        order: ByteOrder,
    ) -> Self {
        let backend = match image {
            ImageBackend::OpenMpi(layout) => Backend::OpenMpi(openmpi::ProcessState::new(
                table,
                Some(layout),
                sizes,
                order,
            )),
            ImageBackend::Mpich(layout) => {
                Backend::Mpich(mpich::ProcessState::new(table, layout, sizes, order))
            }
        };
        ProcessState { backend }
    }

    /// The debugger's process table.
    pub fn table(&self) -> *const abi::mqs_process_callbacks {
        each!(&self.backend, b => b.table)
    }

    /// Lines queued for the debugger's dprints.
    pub fn take_dprints(&mut self) -> Vec<String> {
        each!(&mut self.backend, b => std::mem::take(&mut b.dprints))
    }

    /// Whether the process's symbols were looked up.
    pub fn is_checked(&self) -> bool {
        match &self.backend {
            Backend::OpenMpi(b) => b.symbols.is_some(),
            Backend::Mpich(b) => b.is_checked(),
        }
    }

    /// Gives an Open MPI process the layout its image resolved, if it had
    /// none yet.
    pub fn refresh_image(&mut self, image: Option<ImageBackend>) {
        if let (Backend::OpenMpi(b), Some(ImageBackend::OpenMpi(layout))) =
            (&mut self.backend, image)
        {
            if b.layout.is_none() {
                b.layout = Some(layout);
            }
        }
    }

    /// `mqs_process_has_queues`.
    pub fn check<I: ImageAccess, P: ProcessAccess + ?Sized>(
        &mut self,
        image: &I,
        p: &P,
    ) -> Result<(), Failure> {
        each!(&mut self.backend, b => b.check(image, p))
    }

    /// Whether the communicator list was built since the last setup.
    pub fn has_list(&self) -> bool {
        match &self.backend {
            Backend::OpenMpi(b) => b.signature.is_some(),
            Backend::Mpich(b) => b.has_list(),
        }
    }

    /// `mqs_update_communicator_list`.
    pub fn update_communicators<P: ProcessAccess + ?Sized>(
        &mut self,
        p: &P,
        names: Option<&NameMap>,
    ) -> Result<(), DllError> {
        let r = each!(&mut self.backend, b => b.update_communicators(p, names));
        // The version string names the MPI of the process being read.
        self.say_detected();
        r
    }

    /// Records this process's MPI and backend for the version string.
    pub fn say_detected(&self) {
        let (what, backend) = match &self.backend {
            Backend::OpenMpi(b) => (b.detected(), "openmpi"),
            Backend::Mpich(b) => (b.detected(), b.backend_name()),
        };
        if let Some(what) = what {
            messages::set_detected(&what, backend);
        }
    }

    /// `mqs_setup_communicator_iterator`.
    pub fn setup_communicators(&mut self) -> ReturnCode {
        each!(&mut self.backend, b => b.setup_communicators())
    }

    /// `mqs_get_communicator`.
    pub fn current_comm(&self) -> Result<Communicator, DllError> {
        each!(&self.backend, b => b.current_comm().map(|c| c.to_abi()))
    }

    /// `mqs_get_comm_group`.
    pub fn comm_group(&self) -> Result<Vec<i32>, DllError> {
        each!(&self.backend, b => b.comm_group())
    }

    /// `mqs_next_communicator`.
    pub fn next_communicator(&mut self) -> Result<ReturnCode, DllError> {
        each!(&mut self.backend, b => b.next_communicator())
    }

    /// `mqs_setup_operation_iterator`.
    pub fn setup_operations(
        &mut self,
        p: &ProcessCallbacks,
        class: OpClass,
    ) -> Result<ReturnCode, DllError> {
        each!(&mut self.backend, b => b.setup_operations(p, class))
    }

    /// `mqs_next_operation`.
    pub fn next_operation(&mut self) -> Result<Option<PendingOperation>, DllError> {
        each!(&mut self.backend, b => b.next_operation())
    }
}
