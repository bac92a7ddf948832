//! Connected hosts made a tree when there are more than the fan-out: the
//! roots are assigned with their subtrees, the others told to wait for
//! their parents' calls; frames about a host below a root come through the
//! root's connection.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::super::protocol::Child;
use super::super::tree;
use super::{Command, Host, Run, Stage};

impl Run {
    /// With more connected hosts than `fanout`, makes them a tree: tells
    /// the hosts below the roots to wait for their parents (they are
    /// assigned through them) and gives each root's children, by root.
    pub(super) fn tree(&mut self, fanout: Option<usize>) -> HashMap<String, Vec<Child>> {
        let mut children = HashMap::new();
        let connected: Vec<String> = self
            .hosts
            .iter()
            .filter(|(_, h)| h.stage == Stage::Connected && h.listen.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let Some(k) = fanout.filter(|&k| k > 0 && connected.len() > k) else {
            return children;
        };
        let (roots, below) = tree::shape(connected.len(), k);
        fn build(
            i: usize,
            keys: &[String],
            below: &[Vec<usize>],
            hosts: &BTreeMap<String, Host>,
        ) -> Child {
            let host = &hosts[&keys[i]];
            Child {
                key: keys[i].clone(),
                name: host.name.clone(),
                address: host
                    .listen
                    .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
                members: host.members.clone(),
                children: below[i]
                    .iter()
                    .map(|&j| build(j, keys, below, hosts))
                    .collect(),
            }
        }
        for &r in &roots {
            let root = build(r, &connected, &below, &self.hosts);
            let keys: Vec<String> = root.children.iter().flat_map(Child::subtree).collect();
            if let Some(host) = self.hosts.get_mut(&connected[r]) {
                host.below = keys;
            }
            children.insert(connected[r].clone(), root.children);
        }
        let wait = self.limits.wait_for_parent();
        for (i, key) in connected.iter().enumerate() {
            if roots.contains(&i) {
                continue;
            }
            let Some(host) = self.hosts.get_mut(key) else {
                continue;
            };
            let sent = host
                .commands
                .take()
                .is_some_and(|c| c.send(Command::Delegate { timeout: wait }).is_ok());
            host.stage = if sent {
                Stage::Assigned
            } else {
                Stage::Failed(format!("the collector on host '{}' went away", host.name))
            };
        }
        children
    }

    /// The hosts whose frames come through `key`'s connection: itself and,
    /// for a root of a tree, every host below it.
    pub(super) fn through(&self, key: &str) -> Vec<String> {
        let mut keys = vec![key.to_string()];
        if let Some(host) = self.hosts.get(key) {
            keys.extend(host.below.iter().cloned());
        }
        keys
    }
}
