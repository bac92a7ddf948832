//! Symbol names as a person reads them: C++ (Itanium ABI) and Rust names
//! demangled by addr2line's demanglers (`cpp_demangle`, `rustc-demangle`),
//! and gfortran's module procedures (`__heat_MOD_step`) written
//! `heat::step`. C names, and anything that does not demangle, stay as
//! they are.

use std::borrow::Cow;

/// `name` demangled where it is a mangled C++, Rust or gfortran module
/// name; else `name` itself.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Some(fortran) = fortran_module_procedure(name) {
        return Cow::Owned(fortran);
    }
    // C names never start with `_Z` or `_R` followed by what these
    // demanglers accept, so a C name comes back unchanged.
    addr2line::demangle_auto(Cow::Borrowed(name), None)
}

/// gfortran's `__MODULE_MOD_PROCEDURE` as `MODULE::PROCEDURE`.
fn fortran_module_procedure(name: &str) -> Option<String> {
    let rest = name.strip_prefix("__")?;
    let (module, procedure) = rest.split_once("_MOD_")?;
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    (word(module) && word(procedure)).then(|| format!("{module}::{procedure}"))
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_rust_and_fortran_names_read_as_written() {
        assert_eq!(
            demangle("_ZN9LAMMPS_NS9CommBrick12reverse_commEv"),
            "LAMMPS_NS::CommBrick::reverse_comm()"
        );
        assert_eq!(
            demangle("_ZN4halo9Exchanger3runEii"),
            "halo::Exchanger::run(int, int)"
        );
        // Rust, legacy and v0 manglings, without the hash.
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h7c178e8532e947b7E"),
            "std::rt::lang_start"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("__heat_MOD_step"), "heat::step");
        // C names and half-mangled ones are left alone.
        for c in [
            "main",
            "MPI_Recv",
            "PMPI_Send",
            "mca_pml_ob1_recv",
            "_Zfoo",
            "__libc_start_main",
        ] {
            assert_eq!(demangle(c), c);
        }
    }
}
