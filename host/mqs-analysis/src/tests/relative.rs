//! Peers relative to the rank in the job view: a ring, a halo exchange
//! and a reversed communicator each read as a few lines whatever the job's
//! size, with the ranks that break the pattern on lines of their own.

use super::*;

fn queue_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("  ")).collect()
}

#[test]
fn a_ring_of_a_thousand_ranks_is_one_line_and_its_outliers_theirs() {
    let n = 1000;
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| match r {
            17 => vec![],
            500 => vec![(0, false, 499, 11)],
            _ => vec![(0, false, (r + n - 1) % n, 10)],
        })
        .collect();
    let dump = job(n as usize, &[world(n)], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        queue_lines(&text),
        [
            "  ranks 0-16,18-499,501-999: recv from rank r-1 (mod 1000) tag 10, 4 bytes",
            "  rank 500: recv from rank 499 tag 11, 4 bytes",
        ],
        "{text}"
    );
    assert!(text.lines().count() <= 6, "{text}");
}

#[test]
fn a_peer_that_every_rank_names_keeps_its_number_in_a_relative_line() {
    // A ring whose ranks also all wait for a message from rank 0: the
    // ring's peer is relative, rank 0 is named as itself.
    let n = 1000;
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| match r {
            0 => vec![(0, false, n - 1, 10)],
            _ => vec![(0, false, r - 1, 10), (0, false, 0, 5)],
        })
        .collect();
    let dump = job(n as usize, &[world(n)], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        queue_lines(&text),
        [
            "  rank 0: recv from rank 999 tag 10, 4 bytes",
            "  rank 1: recv from rank 0 tag 10, 4 bytes; recv from rank 0 tag 5, 4 bytes",
            "  ranks 2-999: recv from rank r-1 (mod 1000) tag 10, 4 bytes; recv from rank 0 \
             tag 5, 4 bytes",
        ],
        "{text}"
    );
    // Where no peer is named by a quarter of the ranks, none is a hub: a
    // ring alone stays relative throughout.
    let ring: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| vec![(0, false, (r + n - 1) % n, 10)])
        .collect();
    let text = view::job_view(
        &job(n as usize, &[world(n)], &ring),
        &ViewOptions::default(),
    );
    assert_eq!(
        queue_lines(&text),
        ["  ranks 0-999: recv from rank r-1 (mod 1000) tag 10, 4 bytes"],
        "{text}"
    );
}

#[test]
fn a_halo_exchange_reads_as_its_offsets() {
    // A 2-D periodic grid of 8 x 8 on MPI_COMM_WORLD: each rank receives
    // from its four neighbours and sends to them.
    let (nx, n) = (8i64, 64i64);
    let neighbours = |r: i64| {
        let (x, y) = (r % nx, r / nx);
        [
            y * nx + (x + 1) % nx,
            y * nx + (x + nx - 1) % nx,
            ((y + 1) % nx) * nx + x,
            ((y + nx - 1) % nx) * nx + x,
        ]
    };
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| neighbours(r).iter().map(|&p| (0, false, p, 5)).collect())
        .collect();
    let dump = job(n as usize, &[world(n)], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    let lines = queue_lines(&text);
    // The ranks inside the grid share one line; the edges, whose
    // neighbours wrap around, one line per kind of edge and corner.
    assert!(lines.len() <= 9, "{text}");
    assert!(
        lines.iter().any(|l| l.contains(
            "recv from rank r+1 (mod 64) tag 5, 4 bytes; recv from rank r-1 (mod 64) tag 5, \
             4 bytes; recv from rank r+8 (mod 64) tag 5, 4 bytes; recv from rank r-8 (mod 64) \
             tag 5, 4 bytes"
        )),
        "{text}"
    );
    // Every rank is on exactly one line.
    let mut seen = RankSet::new();
    for line in &lines {
        let ranks = line.trim_start().split(':').next().unwrap();
        let ranks = ranks
            .trim_start_matches("ranks ")
            .trim_start_matches("rank ");
        for r in RankSet::parse(ranks).unwrap().iter() {
            assert!(seen.insert(r), "rank {r} twice: {text}");
        }
    }
    assert_eq!(seen.len(), 64, "{text}");
}

#[test]
fn peers_in_a_reversed_communicator_are_relative_to_its_own_ranks() {
    let n = 6;
    let ring: Vec<i64> = (0..n).rev().collect();
    // World rank r is ring rank n-1-r and receives from ring rank n-2-r,
    // its own ring rank minus one.
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| vec![(1, false, (2 * n - 2 - r) % n, 10)])
        .collect();
    let dump = job(n as usize, &[world(n), ("ring", ring)], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        queue_lines(&text),
        ["  ranks 0-5: recv from \"ring\" rank r-1 (mod 6, r = its \"ring\" rank) tag 10, 4 bytes"],
        "{text}"
    );
}

#[test]
fn two_ranks_that_swap_keep_a_line_each() {
    let ops = vec![vec![(0, false, 1, 3)], vec![(0, false, 0, 3)]];
    let dump = job(2, &[world(2)], &ops);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        queue_lines(&text),
        [
            "  rank 0: recv from rank 1 tag 3, 4 bytes",
            "  rank 1: recv from rank 0 tag 3, 4 bytes",
        ],
        "{text}"
    );
}

#[test]
fn a_long_cycle_of_alike_waits_is_told_once_and_a_short_one_step_by_step() {
    for (n, expected) in [
        (
            1000,
            "deadlock: ranks 0-999 each wait for rank r-1 (mod 1000) (recv tag 10 on \
             MPI_COMM_WORLD)\n"
                .to_owned(),
        ),
        (
            3,
            "deadlock: rank 0 waits for rank 2 (recv tag 10 on MPI_COMM_WORLD), rank 2 waits \
             for rank 1 (recv tag 10 on MPI_COMM_WORLD), rank 1 waits for rank 0 (recv tag 10 \
             on MPI_COMM_WORLD)\n"
                .to_owned(),
        ),
    ] {
        let ops: Vec<Vec<OpSpec>> = (0..n)
            .map(|r| vec![(0, false, (r + n - 1) % n, 10)])
            .collect();
        let mut dump = job(n as usize, &[world(n)], &ops);
        all_blocked_in(&mut dump, "MPI_Recv");
        let j = Job::new(&dump);
        let a = Analysis::new(&j);
        assert!(a.has_deadlock());
        let words = a.words();
        assert!(words.starts_with(&expected), "{words}");
        assert!(words.lines().count() <= 3, "{words}");
    }
}

#[test]
fn dot_draws_a_long_alike_cycle_as_one_node() {
    for n in [1000i64, 3] {
        let ops: Vec<Vec<OpSpec>> = (0..n)
            .map(|r| vec![(0, false, (r + n - 1) % n, 10)])
            .collect();
        let mut dump = job(n as usize, &[world(n)], &ops);
        all_blocked_in(&mut dump, "MPI_Recv");
        let j = Job::new(&dump);
        let a = Analysis::new(&j);
        let graph = crate::view::dot::dot(&a);
        if n == 1000 {
            assert!(
                graph.lines().count() < 20,
                "{} lines",
                graph.lines().count()
            );
            assert!(
                graph.contains("cycle0 [label=\"ranks 0-999\\ndeadlocked\", color=red];"),
                "{graph}"
            );
            assert!(
                graph.contains(
                    "cycle0 -> cycle0 [label=\"ranks 0-999 each wait for rank r-1 (mod 1000) \
                     (recv tag 10 on MPI_COMM_WORLD)\", color=red"
                ),
                "{graph}"
            );
            assert!(!graph.contains("r5 -> "), "no node per rank");
        } else {
            assert!(graph.contains("r0 -> r2"), "{graph}");
            assert!(!graph.contains("cycle0"), "{graph}");
        }
    }
}

#[test]
fn dot_draws_a_large_graph_by_classes_with_its_outliers_on_their_own() {
    // A 32 x 32 grid (no wrap): each rank receives from the neighbours it
    // has; rank 37 is stopped by a signal, its neighbours wait for it.
    let (nx, n) = (32i64, 1024i64);
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| {
            let (x, y) = (r % nx, r / nx);
            let mut mine = Vec::new();
            for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
                let (px, py) = (x + dx, y + dy);
                if (0..nx).contains(&px) && (0..nx).contains(&py) {
                    mine.push((0, false, py * nx + px, 5));
                }
            }
            mine
        })
        .collect();
    let mut dump = job(n as usize, &[world(n)], &ops);
    dump.processes[37].os_state = Some(mqs_core::interface::OsState::new('T', Some(19)));
    let j = Job::new(&dump);
    let graph = crate::view::dot::dot(&Analysis::new(&j));
    let nodes = graph.lines().filter(|l| l.contains(" [label=")).count();
    assert!(nodes <= 40, "{nodes} nodes:\n{graph}");
    assert!(graph.lines().count() <= 200, "{graph}");
    // The ranks inside the grid are one node, each receiving from its four
    // neighbours: one edge back to its own class per distance.
    let inside = graph
        .lines()
        .find(|l| l.contains("[label=\"899 ranks from 33 to 990 in 31 runs\\n"))
        .unwrap_or_else(|| panic!("no class of the inner ranks:\n{graph}"));
    let id = inside.split_whitespace().next().unwrap();
    for d in ["+1", "-1", "+32", "-32"] {
        assert!(
            graph.contains(&format!(
                "{id} -> {id} [style=solid, label=\"recv MPI_COMM_WORLD tag 5 (each to r{d})\"]"
            )),
            "{d}: {graph}"
        );
    }
    // The stopped rank has a node of its own, and its neighbours' waits
    // reach it.
    assert!(
        graph.contains("  r37 [label=\"rank 37\\nstopped by a signal (SIGSTOP)"),
        "{graph}"
    );
    assert!(graph.contains(&format!("{id} -> r37 ")), "{graph}");
    assert_eq!(
        graph.matches(&format!("r37 -> {id} ")).count(),
        1,
        "{graph}"
    );
    assert!(
        graph.contains("[label=\"ranks 1-30\\nstack unknown\"];"),
        "{graph}"
    );
    // Fewer than 64 ranks in a graph: a node each, as before.
    let small: Vec<Vec<OpSpec>> = (0..4).map(|r| vec![(0, false, (r + 1) % 4, 5)]).collect();
    let dump = job(4, &[world(4)], &small);
    let j = Job::new(&dump);
    let graph = crate::view::dot::dot(&Analysis::new(&j));
    assert!(graph.contains("r0 -> r1 [style=solid"), "{graph}");
    assert!(!graph.contains("ranks "), "{graph}");
}

/// A 3-D grid of `dims` on MPI_COMM_WORLD (rank = row-major coordinates),
/// each rank receiving from each neighbour it has (tag 5), the grid told
/// as the DLL tells it.
fn grid_job(dims: [i64; 3], periods: [bool; 3]) -> JobDump {
    let n: i64 = dims.iter().product();
    let grid = mqs_abi::Cartesian::checked(dims.to_vec(), periods.to_vec(), n).unwrap();
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| {
            let mut c = [0i64; mqs_abi::MAX_CART_DIMS];
            assert!(grid.coords(r, &mut c));
            let mut mine = Vec::new();
            for d in 0..3 {
                for step in [-1, 1] {
                    let mut p = [c[0], c[1], c[2]];
                    p[d] += step;
                    if periods[d] {
                        p[d] = p[d].rem_euclid(dims[d]);
                    } else if !(0..dims[d]).contains(&p[d]) {
                        continue;
                    }
                    mine.push((0, false, (p[0] * dims[1] + p[1]) * dims[2] + p[2], 5));
                }
            }
            mine
        })
        .collect();
    let mut dump = job(n as usize, &[world(n)], &ops);
    for p in &mut dump.processes {
        if let Section::Ok { value } = &mut p.communicators {
            value.list[0].cartesian = Some(grid.clone());
        }
    }
    dump
}

#[test]
fn a_periodic_grid_reads_as_one_line_of_offsets() {
    let dump = grid_job([8, 6, 5], [true, true, true]);
    let text = view::job_view(&dump, &ViewOptions::default());
    assert_eq!(
        queue_lines(&text),
        [
            "  ranks 0-239: recv from (-1,0,0) tag 5, 4 bytes; recv from (+1,0,0) tag 5, 4 \
             bytes; recv from (0,-1,0) tag 5, 4 bytes; recv from (0,+1,0) tag 5, 4 bytes; recv \
             from (0,0,-1) tag 5, 4 bytes; recv from (0,0,+1) tag 5, 4 bytes"
        ],
        "{text}"
    );
    assert!(
        text.contains("MPI_COMM_WORLD (ranks 0-239; a 8x6x5 grid, periodic):"),
        "{text}"
    );
}

#[test]
fn a_grid_that_ends_has_a_line_per_face() {
    // Not periodic in dimension 2: the ranks at z = 0 lack (0,0,-1), those
    // at z = 4 (0,0,+1); every other rank shares the inner line.
    let dump = grid_job([4, 4, 5], [true, true, false]);
    let text = view::job_view(&dump, &ViewOptions::default());
    let inner = "recv from (-1,0,0) tag 5, 4 bytes; recv from (+1,0,0) tag 5, 4 bytes; recv from \
                 (0,-1,0) tag 5, 4 bytes; recv from (0,+1,0) tag 5, 4 bytes";
    assert_eq!(
        queue_lines(&text),
        [
            format!("  ranks 0,5,10,...,75: {inner}; recv from (0,0,+1) tag 5, 4 bytes"),
            format!(
                "  ranks 1-3,6-8,11-13,...,76-78: {inner}; recv from (0,0,-1) tag 5, 4 bytes; \
                 recv from (0,0,+1) tag 5, 4 bytes"
            ),
            format!("  ranks 4,9,14,...,79: {inner}; recv from (0,0,-1) tag 5, 4 bytes"),
        ],
        "{text}"
    );
    assert!(
        text.contains("(ranks 0-79; a 4x4x5 grid, periodic in dimensions 0,1):"),
        "{text}"
    );
}

#[test]
fn a_rank_on_a_line_of_its_own_names_its_peers_where_they_are_on_the_grid() {
    // 3 x 3, periodic: rank 4 alone receives from rank 0 (tag 9).
    let mut dump = grid_job([3, 3, 1], [true, true, true]);
    if let Section::Ok { value } = &mut dump.processes[4].communicators {
        if let Section::Ok { value: q } = &mut value.list[0].receives {
            q.operations = vec![op(0, 9, 0x10)];
        }
    }
    let text = view::job_view(&dump, &ViewOptions::default());
    assert!(
        queue_lines(&text).contains(&"  rank 4: recv from rank 0 (at (0,0,0)) tag 9, 4 bytes"),
        "{text}"
    );
}

/// A 2-D grid of `nx` x `ny` (row-major: y fastest) on MPI_COMM_WORLD, told
/// as a grid when `grid`, whose every rank blocks receiving (tag 10) from
/// the neighbour `step` away (wrapping): a cycle per row or column.
fn cycles_on_a_grid(nx: i64, ny: i64, step: [i64; 2], grid: bool) -> String {
    let n = nx * ny;
    let ops: Vec<Vec<OpSpec>> = (0..n)
        .map(|r| {
            let (x, y) = (r / ny, r % ny);
            let peer = (x + step[0]).rem_euclid(nx) * ny + (y + step[1]).rem_euclid(ny);
            vec![(0, false, peer, 10)]
        })
        .collect();
    let mut dump = job(n as usize, &[world(n)], &ops);
    if grid {
        let cart = mqs_abi::Cartesian::checked(vec![nx, ny], vec![true, true], n);
        for p in &mut dump.processes {
            if let Section::Ok { value } = &mut p.communicators {
                value.list[0].cartesian.clone_from(&cart);
            }
        }
    }
    all_blocked_in(&mut dump, "MPI_Recv");
    let j = Job::new(&dump);
    Analysis::new(&j).words()
}

#[test]
fn alike_cycles_are_told_once() {
    // Columns: each rank waits for the one 50 ranks on, 50 cycles of 40.
    assert_eq!(
        cycles_on_a_grid(40, 50, [1, 0], false),
        "deadlock: 50 cycles alike: ranks 0-1999 each wait for rank r+50 (mod 2000) (recv tag \
         10 on MPI_COMM_WORLD)\ndeadlocked: ranks 0-1999 in 50 cycles\n"
    );
    // Rows: the last of each row waits for its first, so the ranks are
    // not at one distance; told by rank, one cycle a line.
    let rows = cycles_on_a_grid(20, 12, [0, 1], false);
    assert_eq!(rows.lines().count(), 21, "{rows}");
    // Told by the offset on the grid where the DLL gave it.
    assert_eq!(
        cycles_on_a_grid(20, 12, [0, 1], true),
        "deadlock: 20 cycles alike: ranks 0-239 each wait for the rank at (0,+1) on \
         MPI_COMM_WORLD (recv tag 10 on MPI_COMM_WORLD)\ndeadlocked: ranks 0-239 in 20 cycles\n"
    );
}
