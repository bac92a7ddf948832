//! Which MPI an image runs, and the backend that reads it.
//!
//! One DLL serves every MPI it knows: `mqs_setup_image` recognises the MPI
//! from the image's symbols (Open MPI's communicator table,
//! `ompi_mpi_communicators`; MPICH's communicator list,
//! `MPIR_All_communicators`), `mqs_image_has_queues` resolves that
//! backend's types once, and every process of the image gets a
//! [`Process`] with that backend. The entry points ([`crate::api`]) only
//! see [`ImageState`] and [`ProcessState`]: what is MPI-specific stays in
//! [`crate::openmpi`] and [`crate::mpich`], the iteration in
//! [`crate::iteration`].

use std::sync::Arc;

use crate::abi;
use crate::access::ImageAccess;
use crate::callbacks::{ImageCallbacks, InfoKind, ProcessCallbacks};
use crate::errors::DllError;
use crate::iteration::{Process, ProcessState};
use crate::messages;
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
    OpenMpi(Arc<openmpi::layout::Layout>),
    Mpich(Arc<mpich::layout::Layout>),
}

impl ImageBackend {
    /// Fresh state for a process of this image (`table`: its callbacks):
    /// its sizes and byte order, and this image's backend.
    pub fn process(
        &self,
        table: *const abi::mqs_process_callbacks,
        image: &ImageCallbacks,
        p: &ProcessCallbacks,
    ) -> Result<ProcessState, DllError> {
        let debugger = image.type_sizes(p);
        Ok(match self {
            ImageBackend::OpenMpi(layout) => {
                let (sizes, order) = openmpi::process_sizes(image, p, debugger)?;
                let backend = openmpi::OpenMpi::new(Arc::clone(layout));
                ProcessState::new(Process::new(table, backend, sizes, order))
            }
            ImageBackend::Mpich(layout) => {
                let (sizes, order) = mpich::process_sizes(p, debugger)?;
                let backend = mpich::Mpich::new(Arc::clone(layout));
                ProcessState::new(Process::new(table, backend, sizes, order))
            }
        })
    }
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
        // Several readers name the same types: each asked for once.
        match check_image(&crate::access::Memo::new(image), self.mpi) {
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
