//! What the synthetic MPICH images of the unit tests share: a ch4 build's
//! groups and requests (`MPIR_Group`, `MPIR_Request` with its status and
//! its device part, `MPIDIG_req_t`), laid out alike in every test.

use crate::testing::FakeImage;

/// Adds the group and request types, at the offsets the tests' memory uses.
pub fn add_group_and_request_types(i: &mut FakeImage) {
    i.add_type("MPIR_Group", 32, &[("size", 0), ("lrank_to_lpid", 8)]);
    i.add_type("MPII_Group_pmap_t", 16, &[("lpid", 0)]);
    i.add_type(
        "MPIR_Request",
        128,
        &[
            ("kind", 0),
            ("cc", 4),
            ("next", 8),
            ("status", 16),
            ("dev", 64),
        ],
    );
    i.add_type(
        "MPI_Status",
        20,
        &[
            ("count_lo", 0),
            ("count_hi_and_cancelled", 4),
            ("MPI_SOURCE", 8),
            ("MPI_TAG", 12),
        ],
    );
    i.add_type("MPIDI_Devreq_t", 48, &[("ch4", 0)]);
    i.add_type(
        "MPIDIG_req_t",
        48,
        &[("buffer", 0), ("count", 8), ("datatype", 16), ("u", 20)],
    );
}
