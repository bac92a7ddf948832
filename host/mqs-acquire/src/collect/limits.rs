//! Every time limit of a collection, in one place: [`Limits`].

use std::time::Duration;

use super::protocol::Child;

/// How many ranks a host that finds its own (`--slurm`) is reckoned to
/// have, for the limits that grow with a subtree's ranks: its members are
/// unknown when its parent sets them.
pub const RANKS_PER_HOST_FOUND: u32 = 64;

/// The time limits of a collection, all made from one *step*: the user's
/// `--timeout` (the front end's, passed to every collector as
/// `--timeout-ms`), the time any one exchange may take. Each wait of the
/// front end, the collectors and the tree takes its limit from here.
///
/// Fixed limits, whatever the step: a collection's connection says hello
/// within [`Limits::HELLO`]; a collector's attempt to call an address
/// back takes at most [`Limits::CONNECT_ATTEMPT`], a parent's call of a
/// child at most [`Limits::CALL`]; a launcher command gets
/// [`Limits::LAUNCHER_GRACE`] to end by itself once its collectors are
/// done, then [`Limits::TERM_GRACE`] after SIGTERM.
///
/// Flat, every collector talking to the front end:
/// - [`callback`](Limits::callback), a step: collectors call back within
///   it (the front end's wait for every host, and each collector's
///   attempts); hosts not heard from by then are reported and the rest
///   read.
/// - [`write`](Limits::write), a step: any frame written to a connection.
/// - [`assignment`](Limits::assignment), three steps: a collector, and the
///   front end's thread serving it, wait this long for its assignment. The
///   front end assigns once every host has called back, at most a step
///   after it started them, so a collector that called back at once waits
///   up to a step; three leave room for a slow start of the front end.
/// - [`all_stopped`](Limits::all_stopped), a step: once it assigned,
///   the front end waits this long for every host to be stopped, then
///   says go (to those still stopping too: each gets go as soon as it
///   reports stopped).
/// - [`go`](Limits::go): a stopped collector waits this long for go, then
///   lets its ranks go unread. It is the front end's step, handed down in
///   every assignment (`go_timeout_ms`), so every level of a tree waits
///   as the front end says.
/// - [`go_relay`](Limits::go_relay), three steps: the front end's thread
///   serving a collector that reported stopped waits this long for the
///   front end's go, which comes within [`all_stopped`](Limits::all_stopped)
///   of the assignment.
/// - [`stopped_report`](Limits::stopped_report): the front end's thread
///   reads a collector's frames until it reports stopped: two steps flat
///   (stopping a rank takes up to 10 s per thread slow to stop).
/// - [`results_frame`](Limits::results_frame): then each of its dumps
///   must come within a step of the one before.
/// - [`all_sent`](Limits::all_sent), a step per member and two: the front
///   end's bound on the whole of what every collector sends (each frame
///   is bounded by its thread; this stops a pathological stream).
/// - [`watchdog`](Limits::watchdog), ten steps and a minute: a collector
///   that is still running then ends itself, and the kernel lets its
///   ranks go. It exceeds the sum of every wait a leaf makes in turn
///   (calling back, its assignment, waiting for a parent, go).
///
/// In a tree (more hosts than the fan-out), each limit of a connection
/// must exceed the waits of the collector at its other end, or a parent
/// gives up on a child that was about to report. So the limits that
/// involve a subtree grow with its height and ranks, and a parent's limit
/// on a child exceeds that child's own limit on its children by at least
/// a step:
/// - [`wait_for_parent`](Limits::wait_for_parent), two steps: a host below
///   the roots waits this long for its parent's call, while the parent
///   waits up to a step for its own assignment.
/// - [`subtree_stopped`](Limits::subtree_stopped): a parent waits for its
///   children to report their subtrees stopped: two steps per level below
///   it (at least two), then reports without those still stopping.
/// - [`child_stopped`](Limits::child_stopped): a parent's thread serving
///   one child reads until the child reports stopped: the child's own
///   [`subtree_stopped`](Limits::subtree_stopped) and two steps more.
///   The front end allows a root that, and a step more
///   ([`stopped_report`](Limits::stopped_report)).
/// - [`child_go`](Limits::child_go): then that thread waits for the
///   parent's go: twice [`go`](Limits::go) and the child's stop limit.
/// - [`child_results`](Limits::child_results): each frame of a child's
///   results comes within a step per rank of its subtree and two, and two
///   more per level below it (flat, this is [`all_sent`](Limits::all_sent)
///   for the child's ranks). A host that finds its own ranks counts as
///   [`RANKS_PER_HOST_FOUND`].
/// - [`subtree_results`](Limits::subtree_results): a parent waits for all
///   its children's results: the longest child's limit and a step; the
///   parent's own parent allows it a step more again
///   ([`child_results`](Limits::child_results) of the parent exceeds this),
///   the front end two ([`results_frame`](Limits::results_frame)).
/// - [`watchdog_extra`](Limits::watchdog_extra): a parent's watchdog waits
///   longer by its subtree's stop and results limits and twice go.
///
/// The sums and products saturate: no step, however long, overflows one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The user's `--timeout`.
    step: Duration,
    /// How long a stopped collector waits for go (the front end's step).
    go: Duration,
    /// The ranks a host is reckoned to have where its members are unknown.
    per_host: u32,
}

impl Limits {
    /// How long a connection may take to say who it is.
    pub const HELLO: Duration = Duration::from_secs(10);
    /// How long one attempt to call the front end back may take.
    pub const CONNECT_ATTEMPT: Duration = Duration::from_secs(5);
    /// How long a parent tries to reach a child.
    pub const CALL: Duration = Duration::from_secs(5);
    /// How long a launcher command gets to end once its collector is done.
    pub const LAUNCHER_GRACE: Duration = Duration::from_secs(5);
    /// How long a launcher command gets to end after SIGTERM (srun then
    /// ends its step) before it is killed.
    pub const TERM_GRACE: Duration = Duration::from_secs(3);
    /// What a collector's watchdog allows beyond its steps: starting a
    /// process, loading symbols and a DLL take time whatever the step.
    const WATCHDOG_MARGIN: Duration = Duration::from_secs(60);

    /// The limits of a collection of step `step` (`--timeout`).
    pub fn new(step: Duration) -> Self {
        Self {
            step,
            go: step,
            per_host: 1,
        }
    }

    /// The limits as an assignment sets them: go within `go` (the front
    /// end's step), and, when hosts find their own ranks (`--slurm`), each
    /// reckoned to have [`RANKS_PER_HOST_FOUND`].
    pub fn assigned(self, go: Duration, finding: bool) -> Self {
        Self {
            go,
            per_host: if finding { RANKS_PER_HOST_FOUND } else { 1 },
            ..self
        }
    }

    /// The step (`--timeout`).
    pub fn step(&self) -> Duration {
        self.step
    }

    /// How long collectors get to call back.
    pub fn callback(&self) -> Duration {
        self.step
    }

    /// How long writing one frame may take.
    pub fn write(&self) -> Duration {
        self.step
    }

    /// How long a collector, and the thread serving it, wait for its
    /// assignment.
    pub fn assignment(&self) -> Duration {
        self.step.saturating_mul(3)
    }

    /// How long the front end waits for every host to be stopped.
    pub fn all_stopped(&self) -> Duration {
        self.step
    }

    /// How long a stopped collector waits for go.
    pub fn go(&self) -> Duration {
        self.go
    }

    /// How long the thread serving a stopped collector waits for the front
    /// end's go.
    pub fn go_relay(&self) -> Duration {
        self.step.saturating_mul(3)
    }

    /// How long the front end waits for everything from hosts with
    /// `members` members in all.
    pub fn all_sent(&self, members: u32) -> Duration {
        self.step.saturating_mul(members.saturating_add(2))
    }

    /// How long a host below the roots waits for its parent's call.
    pub fn wait_for_parent(&self) -> Duration {
        self.step.saturating_mul(2)
    }

    /// How long the front end reads a collector with `children` until it
    /// reports stopped.
    pub fn stopped_report(&self, children: &[Child]) -> Duration {
        if children.is_empty() {
            self.step.saturating_mul(2)
        } else {
            self.subtree_stopped(children)
                .saturating_add(self.step.saturating_mul(3))
        }
    }

    /// How long the front end waits for each frame of the results of a
    /// collector with `children`.
    pub fn results_frame(&self, children: &[Child]) -> Duration {
        if children.is_empty() {
            self.step
        } else {
            self.longest_child_results(children)
                .saturating_add(self.step.saturating_mul(2))
        }
    }

    /// How long a collector waits for its `children` to report their
    /// subtrees stopped.
    pub fn subtree_stopped(&self, children: &[Child]) -> Duration {
        let height = children.iter().map(|c| 1 + c.height()).max().unwrap_or(0);
        self.step.saturating_mul(2).saturating_mul(height.max(1))
    }

    /// How long a collector waits for all its `children`'s results once
    /// they were told to go.
    pub fn subtree_results(&self, children: &[Child]) -> Duration {
        self.longest_child_results(children)
            .saturating_add(self.step)
    }

    /// How long a parent reads `child` until it reports its subtree stopped.
    pub fn child_stopped(&self, child: &Child) -> Duration {
        self.subtree_stopped(&child.children)
            .saturating_add(self.step.saturating_mul(2))
    }

    /// How long the thread serving `child` waits for its parent's go.
    pub fn child_go(&self, child: &Child) -> Duration {
        self.go
            .saturating_mul(2)
            .saturating_add(self.child_stopped(child))
    }

    /// How long each frame of `child`'s results may take once it was told
    /// to go.
    pub fn child_results(&self, child: &Child) -> Duration {
        let steps = 2u32
            .saturating_add(child.ranks(self.per_host))
            .saturating_add(child.height().saturating_mul(2));
        self.step.saturating_mul(steps)
    }

    /// How long a collector runs at most before its watchdog ends it.
    pub fn watchdog(&self) -> Duration {
        self.step
            .saturating_mul(10)
            .saturating_add(Self::WATCHDOG_MARGIN)
    }

    /// How much longer the watchdog of a collector with `children` waits:
    /// as long as it waits for its subtree.
    pub fn watchdog_extra(&self, children: &[Child]) -> Duration {
        if children.is_empty() {
            Duration::ZERO
        } else {
            self.subtree_stopped(children)
                .saturating_add(self.go.saturating_mul(2))
                .saturating_add(self.subtree_results(children))
        }
    }

    /// The longest of the `children`'s results limits.
    fn longest_child_results(&self, children: &[Child]) -> Duration {
        children
            .iter()
            .map(|c| self.child_results(c))
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn child(key: &str, ranks: usize, children: Vec<Child>) -> Child {
        Child {
            key: key.into(),
            name: key.into(),
            address: SocketAddr::from(([127, 0, 0, 1], 1)),
            members: (0..ranks)
                .map(|r| crate::members::Member::single(100 + r as i32, r as i32))
                .collect(),
            children,
        }
    }

    /// A full tree of `height` levels below `key`, `fanout` children per
    /// host, `ranks` ranks on each.
    fn full(key: &str, height: u32, fanout: usize, ranks: usize) -> Child {
        let children = if height == 0 {
            Vec::new()
        } else {
            (0..fanout)
                .map(|i| full(&format!("{key}.{i}"), height - 1, fanout, ranks))
                .collect()
        };
        child(key, ranks, children)
    }

    /// Every host of the tree under `c`, with `c` first.
    fn hosts(c: &Child) -> Vec<&Child> {
        let mut out = vec![c];
        for below in &c.children {
            out.extend(hosts(below));
        }
        out
    }

    #[test]
    fn a_subtree_gets_time_for_its_levels_and_its_ranks() {
        let leaf = child("c", 4, Vec::new());
        let middle = child("b", 2, vec![leaf.clone(), child("d", 0, Vec::new())]);
        assert_eq!((leaf.height(), middle.height()), (0, 1));
        assert_eq!(middle.ranks(1), 2 + 4 + 1);
        let limits = Limits::new(Duration::from_secs(1));
        // A step per rank and two, two more per level below.
        assert_eq!(limits.child_results(&leaf), Duration::from_secs(2 + 4));
        assert_eq!(
            limits.child_results(&middle),
            Duration::from_secs(2 + 7 + 2)
        );
        assert_eq!(
            limits.subtree_stopped(std::slice::from_ref(&middle)),
            Duration::from_secs(4)
        );
        assert_eq!(limits.subtree_stopped(&[]), Duration::from_secs(2));
        // Hosts that find their ranks themselves count as many.
        let found = limits.assigned(Duration::from_secs(1), true);
        assert_eq!(
            found.child_results(&middle),
            Duration::from_secs(2 + 3 * u64::from(RANKS_PER_HOST_FOUND) + 2)
        );
    }

    /// The values the limits had when each was written where it is used.
    #[test]
    fn each_limit_is_the_steps_it_always_was() {
        let step = Duration::from_millis(1500);
        let limits = Limits::new(step);
        assert_eq!(limits.callback(), step);
        assert_eq!(limits.write(), step);
        assert_eq!(limits.all_stopped(), step);
        assert_eq!(limits.go(), step);
        assert_eq!(limits.assignment(), step * 3);
        assert_eq!(limits.go_relay(), step * 3);
        assert_eq!(limits.wait_for_parent(), step * 2);
        assert_eq!(limits.all_sent(5), step * 7);
        assert_eq!(limits.stopped_report(&[]), step * 2);
        assert_eq!(limits.results_frame(&[]), step);
        assert_eq!(limits.watchdog(), step * 10 + Duration::from_secs(60));
        assert_eq!(limits.watchdog_extra(&[]), Duration::ZERO);
        let go = Duration::from_secs(7);
        assert_eq!(limits.assigned(go, false).go(), go);
    }

    /// Flat, a collector's results get what the front end allows them.
    #[test]
    fn a_leaf_gets_for_its_results_what_the_front_end_allows_a_flat_host() {
        let limits = Limits::new(Duration::from_secs(2));
        for ranks in [1, 7, 100] {
            let leaf = child("a", ranks, Vec::new());
            assert_eq!(limits.child_results(&leaf), limits.all_sent(ranks as u32));
        }
    }

    /// For trees of any height and fan-out, with ranks known or found: at
    /// every connection, the limit of the side above exceeds the waits of
    /// the collector below (for its stop and for its results) by at least
    /// a step, and every collector's watchdog exceeds the sum of the waits
    /// it makes one after the other.
    #[test]
    fn a_trees_outer_limits_exceed_its_inner_ones_at_any_height() {
        let step = Duration::from_secs(3);
        for finding in [false, true] {
            let limits = Limits::new(step).assigned(step, finding);
            for height in 0..=8 {
                for fanout in 1..=3u32 {
                    if fanout.pow(height) > 300 {
                        continue;
                    }
                    let root = full("r", height, fanout as usize, 2);
                    let roots = std::slice::from_ref(&root);
                    // The front end, above a root that waits for children.
                    if !root.children.is_empty() {
                        assert!(
                            limits.stopped_report(&root.children)
                                >= limits.subtree_stopped(&root.children) + step
                        );
                        assert!(
                            limits.results_frame(&root.children)
                                >= limits.subtree_results(&root.children) + step
                        );
                        assert!(
                            limits.subtree_stopped(roots) > limits.subtree_stopped(&root.children)
                        );
                    }
                    for host in hosts(&root) {
                        let below = &host.children;
                        // A parent's thread, above `host`.
                        assert!(limits.child_stopped(host) >= limits.subtree_stopped(below) + step);
                        assert!(limits.child_go(host) > limits.child_stopped(host));
                        if !below.is_empty() {
                            assert!(
                                limits.child_results(host) >= limits.subtree_results(below) + step
                            );
                        }
                        // `host` itself, from its start to its last frame.
                        let waits = limits.callback()
                            + limits.assignment()
                            + limits.wait_for_parent()
                            + limits.subtree_stopped(below)
                            + limits.go()
                            + limits.subtree_results(below);
                        assert!(limits.watchdog() + limits.watchdog_extra(below) > waits);
                    }
                }
            }
        }
    }
}
