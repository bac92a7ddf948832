//! A Cartesian communicator's grid as both MPIs keep it: the number of
//! dimensions, and two arrays of ints, the extents and whether each wraps.

use mqs_abi::{Cartesian, MAX_CART_DIMS};

use crate::access::ProcessAccess;
use crate::target::Target;

/// The grid of `ndims` dimensions whose extents and periods are the ints
/// at `dims` and `periods`, if it is one of `size` ranks (at most
/// [`MAX_CART_DIMS`] dimensions, extents multiplying to `size`); None
/// where anything does not read or fit.
pub fn read_grid<P: ProcessAccess + ?Sized>(
    t: &Target<'_, P>,
    ndims: i64,
    dims: u64,
    periods: u64,
    size: i64,
) -> Option<Cartesian> {
    let n = usize::try_from(ndims)
        .ok()
        .filter(|n| (1..=MAX_CART_DIMS).contains(n))?;
    let dims = t.read_ints(dims, n).ok()?;
    let periods = t
        .read_ints(periods, n)
        .ok()?
        .into_iter()
        .map(|p| p != 0)
        .collect();
    Cartesian::checked(dims, periods, size)
}
