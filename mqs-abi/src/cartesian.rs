//! A communicator's Cartesian topology (`MPI_Cart_create`), as the
//! extension entry point `mqs_get_comm_cartesian` gives it, and the grid's
//! arithmetic that DLLs and hosts share: a rank's coordinates (row-major,
//! as `MPI_Cart_coords` defines them) and the offset from one rank to
//! another, folded on periodic dimensions.

/// The most dimensions a host asks for and a DLL reports: more is not a
/// grid anyone reads by offsets (MPI's own limit is the int).
pub const MAX_CART_DIMS: usize = 16;

/// A Cartesian grid: the extent of each dimension and whether it wraps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Cartesian {
    pub dims: Vec<i64>,
    pub periods: Vec<bool>,
}

impl Cartesian {
    /// A grid as an MPI keeps it, if it is one of `size` ranks: between 1
    /// and [`MAX_CART_DIMS`] dimensions, each at least 1, whose product is
    /// the communicator's size (what `MPI_Cart_create` leaves in the
    /// communicator it returns), one period per dimension.
    pub fn checked(dims: Vec<i64>, periods: Vec<bool>, size: i64) -> Option<Self> {
        if dims.is_empty() || dims.len() > MAX_CART_DIMS || dims.len() != periods.len() {
            return None;
        }
        let mut product: i64 = 1;
        for &d in &dims {
            if d < 1 {
                return None;
            }
            product = product.checked_mul(d)?;
        }
        (product == size).then_some(Self { dims, periods })
    }

    /// The number of ranks on the grid.
    pub fn size(&self) -> i64 {
        self.dims.iter().product()
    }

    /// The coordinates of `rank` (its rank in the communicator), the last
    /// dimension varying fastest; None off the grid.
    pub fn coords(&self, rank: i64, out: &mut [i64]) -> bool {
        if rank < 0 || rank >= self.size() || out.len() < self.dims.len() {
            return false;
        }
        let mut rest = rank;
        for (slot, &extent) in out[..self.dims.len()].iter_mut().zip(&self.dims).rev() {
            *slot = rest % extent;
            rest /= extent;
        }
        true
    }

    /// The offset from rank `from` to rank `to` on the grid, written to
    /// `out` (one per dimension): on a periodic dimension folded to the
    /// shorter way round (`-(n-1)/2 ..= n/2`, so that the neighbour across
    /// the wrap is `+1`, and in a dimension of 2 `+1` either way). False if
    /// either is off the grid.
    pub fn offset(&self, from: i64, to: i64, out: &mut [i64]) -> bool {
        let n = self.dims.len();
        let mut a = [0i64; MAX_CART_DIMS];
        if out.len() < n || !self.coords(from, &mut a) || !self.coords(to, out) {
            return false;
        }
        for ((o, &mine), (&extent, &periodic)) in out[..n]
            .iter_mut()
            .zip(&a[..n])
            .zip(self.dims.iter().zip(&self.periods))
        {
            let d = *o - mine;
            *o = if periodic {
                let d = d.rem_euclid(extent);
                if d > extent / 2 {
                    d - extent
                } else {
                    d
                }
            } else {
                d
            };
        }
        true
    }

    /// `3x4x2`.
    pub fn shape(&self) -> String {
        let dims: Vec<String> = self.dims.iter().map(i64::to_string).collect();
        dims.join("x")
    }

    /// How the grid wraps: `periodic`, `not periodic`, or the dimensions
    /// that are (`periodic in dimension 0`, `periodic in dimensions 0,2`).
    pub fn wrapping(&self) -> String {
        let periodic: Vec<String> = (0..)
            .zip(&self.periods)
            .filter(|(_, &p)| p)
            .map(|(i, _): (usize, _)| i.to_string())
            .collect();
        match periodic.len() {
            0 => "not periodic".to_owned(),
            n if n == self.periods.len() => "periodic".to_owned(),
            1 => format!("periodic in dimension {}", periodic[0]),
            _ => format!("periodic in dimensions {}", periodic.join(",")),
        }
    }
}

/// An offset as people write one: `(+1,0,-2)`.
pub fn offset_words(offset: &[i64]) -> String {
    let parts: Vec<String> = offset
        .iter()
        .map(|&d| {
            if d > 0 {
                format!("+{d}")
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("({})", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(dims: &[i64], periods: &[bool]) -> Cartesian {
        let size = dims.iter().product();
        Cartesian::checked(dims.to_vec(), periods.to_vec(), size).unwrap()
    }

    #[test]
    fn coordinates_are_row_major() {
        let g = grid(&[3, 2], &[true, false]);
        let mut c = [0i64; 2];
        let all: Vec<[i64; 2]> = (0..6)
            .map(|r| {
                assert!(g.coords(r, &mut c));
                c
            })
            .collect();
        assert_eq!(all, [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]);
        assert!(!g.coords(6, &mut c));
        assert!(!g.coords(-1, &mut c));
    }

    #[test]
    fn offsets_fold_on_periodic_dimensions_only() {
        let g = grid(&[3, 2], &[true, false]);
        let mut o = [0i64; 2];
        // Rank 4 is (2,0); rank 0 is (0,0): across the wrap, one step up.
        assert!(g.offset(4, 0, &mut o));
        assert_eq!(o, [1, 0]);
        assert!(g.offset(0, 4, &mut o));
        assert_eq!(o, [-1, 0]);
        // Rank 1 is (0,1): not periodic, so -1 from rank 1 to rank 0.
        assert!(g.offset(1, 0, &mut o));
        assert_eq!(o, [0, -1]);
        assert!(!g.offset(0, 6, &mut o));
        // In a dimension of 2, the other one is +1 either way.
        let g = grid(&[2, 2, 2], &[true, true, true]);
        let mut o = [0i64; 3];
        assert!(g.offset(5, 1, &mut o));
        assert_eq!(o, [1, 0, 0]);
        assert!(g.offset(1, 5, &mut o));
        assert_eq!(o, [1, 0, 0]);
        assert_eq!(offset_words(&o), "(+1,0,0)");
        assert_eq!(offset_words(&[0, -2]), "(0,-2)");
    }

    #[test]
    fn only_grids_of_the_communicators_size_are_taken() {
        assert!(Cartesian::checked(vec![3, 2], vec![true, false], 6).is_some());
        assert!(Cartesian::checked(vec![3, 2], vec![true, false], 7).is_none());
        assert!(Cartesian::checked(vec![3, 0], vec![true, false], 0).is_none());
        assert!(Cartesian::checked(vec![6], vec![true, false], 6).is_none());
        assert!(Cartesian::checked(vec![], vec![], 1).is_none());
        assert!(Cartesian::checked(vec![1; 17], vec![false; 17], 1).is_none());
        assert!(Cartesian::checked(vec![i64::MAX, 4], vec![false; 2], 4).is_none());
    }

    #[test]
    fn the_wrapping_is_said_per_dimension() {
        assert_eq!(grid(&[3, 2], &[true, true]).wrapping(), "periodic");
        assert_eq!(grid(&[3, 2], &[false, false]).wrapping(), "not periodic");
        assert_eq!(
            grid(&[3, 2], &[false, true]).wrapping(),
            "periodic in dimension 1"
        );
        assert_eq!(
            grid(&[3, 2, 1], &[true, false, true]).wrapping(),
            "periodic in dimensions 0,2"
        );
        assert_eq!(grid(&[3, 2, 1], &[true, false, true]).shape(), "3x2x1");
    }
}
