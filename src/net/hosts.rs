//! `hosts` shaping, for a cluster: one `tc qdisc replace dev <iface> root
//! netem delay .. rate ..` on every node, started by a per-host launch (one
//! task per node through the same launcher as the ranks: `mpirun --hostfile
//! H --map-by ppr:1:node` or `srun --ntasks-per-node=1`), and `tc qdisc del
//! dev <iface> root` on every node afterwards, which restores the kernel's
//! default. As in the paper, where `tc` ran on each instance's NIC.
//!
//! The interface is configured (`--interface`), never guessed, and checked
//! to be an interface name before it reaches `tc`. Kernel byte counters are
//! not read in this mode (each node's counters include all its traffic).

use super::{Condition, Exec, NetError};

/// Whether `name` can be a Linux interface name: 1 to 15 characters of
/// letters, digits, `_`, `.`, `-`, not starting with `-`.
pub fn valid_interface(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The network condition applied on every node of a cluster run; restored
/// when dropped (on success, failure or interruption) if it was applied.
pub struct HostShaping<'e> {
    exec: &'e dyn Exec,
    per_host: Vec<String>,
    interface: String,
    condition: Condition,
    applied: bool,
}

impl std::fmt::Debug for HostShaping<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostShaping")
            .field("interface", &self.interface)
            .field("condition", &self.condition.label)
            .field("applied", &self.applied)
            .finish()
    }
}

impl<'e> HostShaping<'e> {
    /// `per_host` starts one copy of a command on every node (the
    /// launcher's per-host prefix).
    pub fn new(
        exec: &'e dyn Exec,
        per_host: Vec<String>,
        interface: &str,
        condition: Condition,
    ) -> Result<Self, NetError> {
        if !valid_interface(interface) {
            return Err(NetError::BadInterface {
                name: interface.to_string(),
            });
        }
        Ok(Self {
            exec,
            per_host,
            interface: interface.to_string(),
            condition,
            applied: false,
        })
    }

    /// The command that applies the condition on every node.
    pub fn setup_command(&self) -> Vec<String> {
        let mut argv = self.per_host.clone();
        argv.extend(
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                &self.interface,
                "root",
                "netem",
            ]
            .map(String::from),
        );
        if self.condition.latency_s > 0.0 {
            argv.push("delay".into());
            argv.push(format!(
                "{}us",
                (self.condition.latency_s * 1e6).round() as u64
            ));
        }
        if let Some(bps) = self.condition.bandwidth_bps {
            argv.push("rate".into());
            argv.push(format!("{}bit", bps as u64));
        }
        argv
    }

    /// The command that restores every node's default qdisc.
    pub fn teardown_command(&self) -> Vec<String> {
        let mut argv = self.per_host.clone();
        argv.extend(["tc", "qdisc", "del", "dev", &self.interface, "root"].map(String::from));
        argv
    }

    /// Applies the condition on every node.
    pub fn up(&mut self) -> Result<(), NetError> {
        // marked first: a launch that failed halfway may have shaped some nodes
        self.applied = true;
        self.exec.run(&self.setup_command()).map(|_| ())
    }

    /// How the condition was applied, for runs.csv and shaping.json.
    pub fn describe(&self) -> String {
        format!(
            "hosts: netem on {} of every node ({}); kernel counters not read",
            self.interface, self.condition.label
        )
    }
}

impl Drop for HostShaping<'_> {
    fn drop(&mut self) {
        if self.applied
            && let Err(e) = self.exec.run(&self.teardown_command())
        {
            eprintln!(
                "warning: could not restore the nodes' qdisc on {}: {e}; run `{}` by hand",
                self.interface,
                self.teardown_command().join(" ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::DryRun;

    fn condition() -> Condition {
        Condition::from_yaml(
            &yaml_serde::from_str("{bandwidth: 100mbit, latency: 0.15ms}").unwrap(),
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn every_node_is_shaped_then_restored() {
        let exec = DryRun::default();
        let prefix: Vec<String> = ["srun", "--ntasks-per-node=1"].map(String::from).to_vec();
        {
            let mut h = HostShaping::new(&exec, prefix, "eth0", condition()).unwrap();
            h.up().unwrap();
        }
        assert_eq!(
            exec.commands(),
            [
                "srun --ntasks-per-node=1 tc qdisc replace dev eth0 root netem delay 150us rate 100000000bit",
                "srun --ntasks-per-node=1 tc qdisc del dev eth0 root",
            ]
        );
    }

    #[test]
    fn nothing_is_restored_that_was_never_applied() {
        let exec = DryRun::default();
        drop(HostShaping::new(&exec, Vec::new(), "ib0", condition()).unwrap());
        assert!(exec.commands().is_empty());
    }

    #[test]
    fn interface_names_are_checked() {
        for bad in [
            "",
            "-x",
            "eth0; reboot",
            "a b",
            "averyveryverylongname",
            "../x",
        ] {
            assert!(!valid_interface(bad), "{bad}");
            assert!(HostShaping::new(&DryRun::default(), Vec::new(), bad, condition()).is_err());
        }
        for good in ["eth0", "ens5", "ib0.8001", "bond-0", "enp1s0f1_x"] {
            assert!(valid_interface(good), "{good}");
        }
    }
}
