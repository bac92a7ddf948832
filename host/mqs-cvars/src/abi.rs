//! The two MPI ABIs mqs loads, as their `mpi.h` define them: how a library
//! is recognised, what its handles look like, and the numbers behind the
//! MPI_T constants. The values are checked against each MPI's own `mpi.h`
//! by `tests/e2e/cvars_mpi.rs`, which compiles a probe with its `mpicc`.
//!
//! Open MPI: `MPI_Datatype` is a pointer to a global object (`MPI_INT` is
//! `&ompi_mpi_int`), the MPI_T constants are enums counting from 0.
//! MPICH: `MPI_Datatype` is an `int` constant, the MPI_T constants are
//! enums starting at arbitrary offsets (verbosity 221, binding 9700, scope
//! 60438). MPI_T_enum and MPI_T_cvar_handle are pointers in both.

use crate::model::{Bind, Datatype, Family, Scope, Verbosity};

impl Family {
    /// A symbol every library of this ABI defines, because its `mpi.h`
    /// refers to it (checked with dlsym after loading; the first family
    /// whose marker resolves wins): Open MPI's MPI_INT is `&ompi_mpi_int`,
    /// MPICH's MPI_DUP_FN is `MPIR_Dup_fn`.
    pub fn marker(self) -> &'static str {
        match self {
            Family::OpenMpi => "ompi_mpi_int",
            Family::Mpich => "MPIR_Dup_fn",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::OpenMpi => "Open MPI",
            Family::Mpich => "MPICH",
        }
    }

    pub fn abi(self) -> &'static Abi {
        match self {
            Family::OpenMpi => &OPEN_MPI,
            Family::Mpich => &MPICH,
        }
    }

    /// How a user sets variable `name` to `value` for a job.
    pub fn how_to_set(self, name: &str, value: &str) -> Vec<String> {
        let quoted = shell_quote(value);
        match self {
            Family::OpenMpi => vec![
                format!("export OMPI_MCA_{name}={quoted}"),
                format!("mpirun --mca {name} {quoted} ..."),
            ],
            Family::Mpich => {
                let env = mpich_env_name(name);
                vec![
                    format!("export {env}={quoted}"),
                    format!("mpiexec -genv {env} {quoted} ..."),
                ]
            }
        }
    }

    /// Environment variables through which this family's library takes
    /// control variable values (name prefixes).
    pub fn env_prefixes(self) -> &'static [&'static str] {
        match self {
            Family::OpenMpi => &["OMPI_MCA_"],
            Family::Mpich => &["MPICH_", "MPIR_PARAM_", "MPIR_CVAR_"],
        }
    }
}

/// MPICH names its variables MPIR_CVAR_<NAME> in MPI_T; the environment
/// variable is that name too.
fn mpich_env_name(name: &str) -> String {
    if name.starts_with("MPIR_CVAR_") {
        name.to_owned()
    } else {
        format!("MPIR_CVAR_{name}")
    }
}

fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/+=@%".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// How a datatype handle is represented in a family's ABI.
#[derive(Debug, Clone, Copy)]
pub enum DatatypeHandles {
    /// `MPI_Datatype` is a pointer to these global objects.
    Symbols(&'static [(Datatype, &'static str)]),
    /// `MPI_Datatype` is an int with these values.
    Ints(&'static [(Datatype, i32)]),
}

/// The MPI_T constants of one ABI.
#[derive(Debug)]
pub struct Abi {
    pub family: Family,
    pub datatypes: DatatypeHandles,
    /// MPI_T_VERBOSITY_USER_BASIC .. MPIDEV_ALL, in the order of
    /// [`Verbosity::ALL`].
    pub verbosity: [i32; 9],
    /// MPI_T_SCOPE_CONSTANT .. ALL_EQ, in the order of [`Scope::ALL`].
    pub scope: [i32; 7],
    /// MPI_T_BIND_NO_OBJECT .. MPI_INFO, in the order of [`Bind::ALL`].
    pub bind: [i32; 11],
    pub errors: &'static [(MpiTError, i32)],
}

/// The MPI_T_ERR_* codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MpiTError {
    Memory,
    NotInitialized,
    CannotInit,
    InvalidIndex,
    InvalidItem,
    InvalidHandle,
    OutOfHandles,
    OutOfSessions,
    InvalidSession,
    CvarSetNotNow,
    CvarSetNever,
    PvarNoStartstop,
    PvarNoWrite,
    PvarNoAtomic,
    Invalid,
    InvalidName,
}

impl MpiTError {
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "MPI_T_ERR_MEMORY",
            Self::NotInitialized => "MPI_T_ERR_NOT_INITIALIZED",
            Self::CannotInit => "MPI_T_ERR_CANNOT_INIT",
            Self::InvalidIndex => "MPI_T_ERR_INVALID_INDEX",
            Self::InvalidItem => "MPI_T_ERR_INVALID_ITEM",
            Self::InvalidHandle => "MPI_T_ERR_INVALID_HANDLE",
            Self::OutOfHandles => "MPI_T_ERR_OUT_OF_HANDLES",
            Self::OutOfSessions => "MPI_T_ERR_OUT_OF_SESSIONS",
            Self::InvalidSession => "MPI_T_ERR_INVALID_SESSION",
            Self::CvarSetNotNow => "MPI_T_ERR_CVAR_SET_NOT_NOW",
            Self::CvarSetNever => "MPI_T_ERR_CVAR_SET_NEVER",
            Self::PvarNoStartstop => "MPI_T_ERR_PVAR_NO_STARTSTOP",
            Self::PvarNoWrite => "MPI_T_ERR_PVAR_NO_WRITE",
            Self::PvarNoAtomic => "MPI_T_ERR_PVAR_NO_ATOMIC",
            Self::Invalid => "MPI_T_ERR_INVALID",
            Self::InvalidName => "MPI_T_ERR_INVALID_NAME",
        }
    }
}

/// MPI_SUCCESS in both families.
pub const MPI_SUCCESS: i32 = 0;
/// MPI_THREAD_SINGLE in both families; the levels run 0..=3.
pub const MPI_THREAD_SINGLE: i32 = 0;
pub const MPI_THREAD_MULTIPLE: i32 = 3;

impl Abi {
    pub fn code(&self, error: MpiTError) -> i32 {
        self.errors
            .iter()
            .find(|(e, _)| *e == error)
            .map_or(i32::MIN, |(_, code)| *code)
    }

    /// The MPI_T_ERR_* a code is, if any.
    pub fn error_of(&self, code: i32) -> Option<MpiTError> {
        self.errors
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(e, _)| *e)
    }

    /// A return code as text: MPI_SUCCESS, an MPI_T_ERR_* name, or a note
    /// that it is none of them.
    pub fn code_name(&self, code: i32) -> String {
        if code == MPI_SUCCESS {
            return "MPI_SUCCESS".into();
        }
        match self.error_of(code) {
            Some(e) => e.name().into(),
            None => "not an MPI_T error code".into(),
        }
    }

    pub fn verbosity(&self, raw: i32) -> Verbosity {
        lookup(&self.verbosity, Verbosity::ALL, raw).unwrap_or(Verbosity::Unknown(raw))
    }

    pub fn scope(&self, raw: i32) -> Scope {
        lookup(&self.scope, Scope::ALL, raw).unwrap_or(Scope::Unknown(raw))
    }

    pub fn bind(&self, raw: i32) -> Bind {
        lookup(&self.bind, Bind::ALL, raw).unwrap_or(Bind::Unknown(raw))
    }

    pub fn bind_no_object(&self) -> i32 {
        self.bind[0]
    }
}

fn lookup<T: Copy>(raw_values: &[i32], named: &[T], raw: i32) -> Option<T> {
    raw_values
        .iter()
        .position(|&v| v == raw)
        .and_then(|i| named.get(i).copied())
}

/// Open MPI 4.1 (`ompi/include/mpi.h.in`).
pub static OPEN_MPI: Abi = Abi {
    family: Family::OpenMpi,
    datatypes: DatatypeHandles::Symbols(&[
        (Datatype::Int, "ompi_mpi_int"),
        (Datatype::Unsigned, "ompi_mpi_unsigned"),
        (Datatype::UnsignedLong, "ompi_mpi_unsigned_long"),
        (Datatype::UnsignedLongLong, "ompi_mpi_unsigned_long_long"),
        (Datatype::Count, "ompi_mpi_count"),
        (Datatype::Char, "ompi_mpi_char"),
        (Datatype::Double, "ompi_mpi_double"),
        (Datatype::Long, "ompi_mpi_long"),
        (Datatype::LongLong, "ompi_mpi_long_long_int"),
        (Datatype::CBool, "ompi_mpi_c_bool"),
        (Datatype::Int32, "ompi_mpi_int32_t"),
        (Datatype::Uint32, "ompi_mpi_uint32_t"),
        (Datatype::Int64, "ompi_mpi_int64_t"),
        (Datatype::Uint64, "ompi_mpi_uint64_t"),
    ]),
    verbosity: [0, 1, 2, 3, 4, 5, 6, 7, 8],
    scope: [0, 1, 2, 3, 4, 5, 6],
    bind: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    errors: &[
        (MpiTError::Memory, 54),
        (MpiTError::NotInitialized, 55),
        (MpiTError::CannotInit, 56),
        (MpiTError::InvalidIndex, 57),
        (MpiTError::InvalidItem, 58),
        (MpiTError::InvalidHandle, 59),
        (MpiTError::OutOfHandles, 60),
        (MpiTError::OutOfSessions, 61),
        (MpiTError::InvalidSession, 62),
        (MpiTError::CvarSetNotNow, 63),
        (MpiTError::CvarSetNever, 64),
        (MpiTError::PvarNoStartstop, 65),
        (MpiTError::PvarNoWrite, 66),
        (MpiTError::PvarNoAtomic, 67),
        (MpiTError::Invalid, 72),
        (MpiTError::InvalidName, 73),
    ],
};

/// MPICH 4.0 (`src/include/mpi.h.in`, as configured for LP64 Linux).
pub static MPICH: Abi = Abi {
    family: Family::Mpich,
    datatypes: DatatypeHandles::Ints(&[
        (Datatype::Int, 0x4c00_0405),
        (Datatype::Unsigned, 0x4c00_0406),
        (Datatype::UnsignedLong, 0x4c00_0808),
        (Datatype::UnsignedLongLong, 0x4c00_0819),
        (Datatype::Count, 0x4c00_0845),
        (Datatype::Char, 0x4c00_0101),
        (Datatype::Double, 0x4c00_080b),
        (Datatype::Long, 0x4c00_0807),
        (Datatype::LongLong, 0x4c00_0809),
        (Datatype::CBool, 0x4c00_013f),
        (Datatype::Int32, 0x4c00_0439),
        (Datatype::Uint32, 0x4c00_043d),
        (Datatype::Int64, 0x4c00_083a),
        (Datatype::Uint64, 0x4c00_083e),
    ]),
    verbosity: [221, 222, 223, 224, 225, 226, 227, 228, 229],
    scope: [60438, 60439, 60440, 60441, 60442, 60443, 60444],
    bind: [
        9700, 9701, 9702, 9703, 9704, 9705, 9706, 9707, 9708, 9709, 9710,
    ],
    errors: &[
        (MpiTError::Memory, 59),
        (MpiTError::NotInitialized, 60),
        (MpiTError::CannotInit, 61),
        (MpiTError::InvalidIndex, 62),
        (MpiTError::InvalidItem, 63),
        (MpiTError::InvalidHandle, 64),
        (MpiTError::OutOfHandles, 65),
        (MpiTError::OutOfSessions, 66),
        (MpiTError::InvalidSession, 67),
        (MpiTError::CvarSetNotNow, 68),
        (MpiTError::CvarSetNever, 69),
        (MpiTError::PvarNoStartstop, 70),
        (MpiTError::PvarNoWrite, 71),
        (MpiTError::PvarNoAtomic, 72),
        (MpiTError::InvalidName, 73),
        (MpiTError::Invalid, 74),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_map_both_ways() {
        for abi in [&OPEN_MPI, &MPICH] {
            for (i, v) in Verbosity::ALL.iter().enumerate() {
                assert_eq!(abi.verbosity(abi.verbosity[i]), *v);
            }
            assert_eq!(abi.scope(-7), Scope::Unknown(-7));
            assert_eq!(abi.bind(abi.bind_no_object()), Bind::NoObject);
            assert_eq!(
                abi.code_name(abi.code(MpiTError::InvalidItem)),
                "MPI_T_ERR_INVALID_ITEM"
            );
            assert_eq!(abi.code_name(12345), "not an MPI_T error code");
        }
    }

    #[test]
    fn settings_say_how_to_apply_them() {
        assert_eq!(
            Family::OpenMpi.how_to_set("btl_vader_eager_limit", "8192"),
            [
                "export OMPI_MCA_btl_vader_eager_limit=8192",
                "mpirun --mca btl_vader_eager_limit 8192 ..."
            ]
        );
        assert_eq!(
            Family::Mpich.how_to_set("MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE", "a b")[0],
            "export MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE='a b'"
        );
    }
}
