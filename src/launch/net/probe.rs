//! What this host's kernel allows, probed rather than assumed. Machines of
//! one kind differ (which congestion controls a namespace may take, netem,
//! IPv6), so a shaped experiment asks before its first run, in a throwaway
//! namespace, with the very commands its runs will use, and refuses with a
//! message that says what to change.

use serde::Serialize;

use super::exec::argv;
use super::netns::{SUBNET, congctl_command, rate_commands, route_has_congctl, tag_of};
use super::{Condition, Exec, NetError, PREFIX, TcpCongestion};

/// What shaping knows of the kernel it shapes on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HostNet {
    /// The kernel accepts netem (else the transport injects latency).
    pub netem: bool,
    /// The kernel has IPv6 (then the ranks' interfaces get no link-local
    /// address, so no neighbour discovery shows up in their counters).
    pub ipv6: bool,
    /// The host's congestion-control sysctls (`None`: unreadable).
    pub tcp: Option<TcpSettings>,
}

impl HostNet {
    /// What a dry run assumes (it probes nothing).
    pub(crate) fn assumed() -> Self {
        Self {
            netem: true,
            ipv6: true,
            tcp: None,
        }
    }
}

/// The host's TCP congestion-control sysctls (global, read in the host's
/// namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TcpSettings {
    /// `net.ipv4.tcp_available_congestion_control`: loaded algorithms.
    pub available: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`: what an unprivileged
    /// socket, or a namespace other than the host's as its default, may use.
    pub allowed: Vec<String>,
    /// `net.ipv4.tcp_congestion_control`: the host's default, which new
    /// namespaces inherit.
    pub default: String,
}

impl TcpSettings {
    /// Reads the three sysctls from `/proc/sys/net/ipv4`.
    pub(crate) fn read() -> Option<Self> {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let words = |s: String| s.split_whitespace().map(String::from).collect();
        Some(Self {
            available: words(read("tcp_available_congestion_control")?),
            allowed: words(read("tcp_allowed_congestion_control")?),
            default: read("tcp_congestion_control")?,
        })
    }

    /// Refuses the first condition whose algorithm the kernel has not loaded.
    pub(crate) fn check_loaded(&self, conditions: &[&Condition]) -> Result<(), NetError> {
        conditions
            .iter()
            .try_for_each(|c| self.check_available(c.tcp))
    }

    /// Refuses an algorithm the kernel has not loaded.
    pub(crate) fn check_available(&self, tcp: TcpCongestion) -> Result<(), NetError> {
        if self.available.iter().any(|a| a == tcp.name()) {
            Ok(())
        } else {
            Err(NetError::TcpUnavailable {
                name: tcp.name().into(),
                available: self.available.join(" "),
            })
        }
    }
}

/// The host kernel's release (`6.1.0-...`) as (major, minor).
pub(crate) fn kernel_version() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut parts = text.trim().split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether the kernel has IPv6 (not booted with `ipv6.disable=1`).
pub(crate) fn kernel_has_ipv6() -> bool {
    std::path::Path::new("/proc/sys/net/ipv6").exists()
}

/// A throwaway namespace `rpr-<tag>-probe` with one veth pair (`eth0`,
/// `eth1`) and `eth0` addressed on the shaped subnet, deleted when dropped
/// (`repro net down` finds it if the driver is killed first).
pub(crate) struct ProbeNs<'e> {
    exec: &'e dyn Exec,
    name: String,
    tag: String,
}

impl std::fmt::Debug for ProbeNs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeNs").field("name", &self.name).finish()
    }
}

impl<'e> ProbeNs<'e> {
    /// Makes the namespace (needs root).
    pub(crate) fn new(exec: &'e dyn Exec) -> Result<Self, NetError> {
        let seed = format!("{:06x}", std::process::id() & 0xff_ffff);
        let tag = tag_of(&seed).ok_or(NetError::BadName { name: seed })?;
        // owned like a run's network, so no other run tidies it away
        if !exec.claim(&tag)? {
            return Err(NetError::Exists {
                name: format!("{PREFIX}-{tag}-probe (its owner record)"),
            });
        }
        let probe = Self {
            exec,
            name: format!("{PREFIX}-{tag}-probe"),
            tag,
        };
        exec.run(&argv(&["ip", "netns", "add", &probe.name]))?;
        let ns = probe.name.as_str();
        for cmd in [
            argv(&[
                "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
            ]),
            argv(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                "10.217.0.1/24",
                "dev",
                "eth0",
            ]),
            argv(&["ip", "-n", ns, "link", "set", "eth1", "up"]),
            argv(&["ip", "-n", ns, "link", "set", "eth0", "up"]),
        ] {
            exec.run(&cmd)?;
        }
        Ok(probe)
    }

    /// Whether the kernel accepts `tc qdisc replace dev eth0 root <qdisc>`.
    pub(crate) fn qdisc(&self, qdisc: &[&str]) -> bool {
        let mut cmd = argv(&[
            "tc", "-n", &self.name, "qdisc", "replace", "dev", "eth0", "root",
        ]);
        cmd.extend(qdisc.iter().map(|s| (*s).to_string()));
        self.exec.run(&cmd).is_ok()
    }

    /// Whether the kernel accepts a netem qdisc.
    pub(crate) fn netem(&self) -> bool {
        self.qdisc(&["netem", "delay", "1ms"])
    }

    /// Runs the `tc` commands of `condition` on `eth0`.
    pub(crate) fn condition(&self, condition: &Condition, netem: bool) -> Result<(), NetError> {
        let _ = self.exec.run(&argv(&[
            "tc", "-n", &self.name, "qdisc", "del", "dev", "eth0", "root",
        ]));
        for cmd in rate_commands(Some(&self.name), "eth0", condition, netem) {
            self.exec.run(&cmd).map_err(|e| NetError::QdiscRefused {
                condition: condition.label.clone(),
                command: cmd.join(" "),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Sets `tcp` on `eth0`'s subnet route and reads the route back.
    pub(crate) fn congctl(&self, tcp: TcpCongestion) -> Result<(), String> {
        self.exec
            .run(&congctl_command(&self.name, "10.217.0.1", tcp))
            .map_err(|e| e.to_string())?;
        let route = self
            .exec
            .run(&argv(&["ip", "-n", &self.name, "route", "show", SUBNET]))
            .map_err(|e| e.to_string())?;
        if route_has_congctl(&route, tcp) {
            Ok(())
        } else {
            Err(format!("the route reads back as `{}`", route.trim()))
        }
    }

    /// Whether the namespace may take `tcp` as its default (writes only
    /// the probe namespace's sysctl; call it only where that sysctl is per
    /// namespace, kernel 4.15 and later, or it would change the host's).
    pub(crate) fn namespace_default(&self, tcp: TcpCongestion) -> bool {
        self.exec
            .run(&argv(&[
                "ip",
                "netns",
                "exec",
                &self.name,
                "sysctl",
                "-q",
                "-w",
                &format!("net.ipv4.tcp_congestion_control={}", tcp.name()),
            ]))
            .is_ok()
    }
}

impl Drop for ProbeNs<'_> {
    fn drop(&mut self) {
        let _ = self.exec.run(&argv(&["ip", "netns", "del", &self.name]));
        self.exec.release(&self.tag);
    }
}

/// Checks, before any run, that this host can shape every condition of an
/// experiment, and learns what it needs to know (netem, IPv6, the TCP
/// sysctls): each condition's congestion control is loaded and accepted on
/// a namespace's route, and its `tc` commands are accepted as they will be
/// run. Needs root.
pub(crate) fn preflight(exec: &dyn Exec, conditions: &[&Condition]) -> Result<HostNet, NetError> {
    let tcp = TcpSettings::read().ok_or(NetError::NoTcpSysctls)?;
    tcp.check_loaded(conditions)?;
    let mut algorithms: Vec<TcpCongestion> = Vec::new();
    for c in conditions {
        if !algorithms.contains(&c.tcp) {
            algorithms.push(c.tcp);
        }
    }
    let probe = ProbeNs::new(exec)?;
    let netem = probe.netem();
    for a in algorithms {
        probe.congctl(a).map_err(|reason| NetError::TcpRefused {
            name: a.name().into(),
            allowed: tcp.allowed.join(" "),
            reason,
        })?;
    }
    for c in conditions {
        probe.condition(c, netem)?;
    }
    Ok(HostNet {
        netem,
        ipv6: kernel_has_ipv6(),
        tcp: Some(tcp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::net::DryRun;

    fn settings() -> TcpSettings {
        TcpSettings {
            available: vec!["reno".into(), "bbr".into(), "cubic".into()],
            allowed: vec!["reno".into(), "bbr".into()],
            default: "bbr".into(),
        }
    }

    #[test]
    fn an_algorithm_the_kernel_has_not_loaded_is_refused_by_name() {
        let mut s = settings();
        assert!(s.check_available(TcpCongestion::Cubic).is_ok());
        s.available.retain(|a| a != "cubic");
        let e = s.check_available(TcpCongestion::Cubic).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`cubic`"), "{msg}");
        assert!(msg.contains("tcp_available_congestion_control"), "{msg}");
        assert!(msg.contains("reno bbr"), "{msg}");
        assert!(msg.contains("modprobe tcp_cubic"), "{msg}");
    }

    #[test]
    fn the_host_sysctls_are_read() {
        let s = TcpSettings::read().expect("Linux has these sysctls");
        assert!(s.available.contains(&s.default), "{s:?}");
        assert!(kernel_version().is_some());
    }

    fn condition(yaml: &str) -> Condition {
        Condition::from_yaml(&yaml_serde::from_str(yaml).unwrap(), None)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_route_without_the_congctl_is_refused_and_the_probe_namespace_removed() {
        // the kernel "accepts" every command but shows the route without congctl
        let exec = DryRun::answering(|a| {
            if a.join(" ").contains("route show") {
                "10.217.0.0/24 dev eth0 proto kernel scope link src 10.217.0.1\n".into()
            } else {
                String::new()
            }
        });
        let probe = ProbeNs::new(&exec).unwrap();
        let e = probe.congctl(TcpCongestion::Cubic).unwrap_err();
        assert!(e.contains("reads back"), "{e}");
        drop(probe);
        let cmds = exec.commands();
        assert!(cmds[0].starts_with("ip netns add rpr-"), "{cmds:?}");
        assert!(cmds.last().unwrap().starts_with("ip netns del rpr-"));
        assert!(crate::launch::net::netns::is_our_name(
            cmds[0].rsplit(' ').next().unwrap()
        ));
    }

    #[test]
    fn preflight_runs_each_condition_s_commands_and_reports_netem() {
        let exec = DryRun::answering(|a| {
            let line = a.join(" ");
            if line.contains("route show") {
                "10.217.0.0/24 dev eth0 proto kernel scope link src 10.217.0.1 congctl lock cubic\n"
                    .into()
            } else {
                String::new()
            }
        });
        let c = condition("{bandwidth: 5mbit, latency: 1ms}");
        let host = preflight(&exec, &[&c]).unwrap();
        assert!(host.netem);
        let cmds = exec.commands();
        assert!(cmds.iter().any(|c| c.contains("congctl lock cubic")));
        assert!(cmds.iter().any(|c| c.contains("htb default 20")));
        assert!(cmds.iter().any(|c| c.contains("netem delay 1000us")));
    }
}
