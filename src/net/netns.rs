//! One host, real shaping: a network namespace per rank, a veth pair from
//! each into one bridge, addresses from a private test subnet, and `tc` on
//! every rank's side of its veth, so each rank's egress is limited the way
//! `tc` on each instance's NIC limited it in the paper.
//!
//! ```text
//!   rpr-<tag>-r0 [eth0 10.217.X.1] --veth-- rpr<tag>h0 --+
//!   rpr-<tag>-r1 [eth0 10.217.X.2] --veth-- rpr<tag>h1 --+-- bridge rpr<tag>br 10.217.X.254
//!   ...                                                   |   (mpirun and its daemon reach
//!                                                         +    the ranks through it)
//! ```

use serde::Serialize;

use super::{Condition, Exec, NetError, PREFIX, RateQdisc};

/// Packets and bytes a qdisc dequeued (what the rank really sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct QdiscStats {
    pub bytes: u64,
    pub packets: u64,
    pub dropped: u64,
}

impl QdiscStats {
    /// Parses the first `Sent <bytes> bytes <pkts> pkt (dropped <d>, ...` of
    /// `tc -s qdisc show` (the root qdisc comes first).
    pub fn parse(text: &str) -> Option<Self> {
        let line = text.lines().find(|l| l.trim_start().starts_with("Sent "))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let num =
            |i: usize| -> Option<u64> { words.get(i)?.trim_end_matches([',', ')']).parse().ok() };
        let dropped_at = words.iter().position(|w| *w == "(dropped")?;
        Some(Self {
            bytes: num(1)?,
            packets: num(3)?,
            dropped: num(dropped_at + 1)?,
        })
    }
}

/// The names of one shaped network: `rpr` + `tag` (six hex digits) + suffix.
/// Linux limits interface names to 15 characters; these use at most 13.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Names {
    tag: String,
}

impl Names {
    fn namespace(&self, r: usize) -> String {
        format!("{PREFIX}-{}-r{r}", self.tag)
    }
    fn host_veth(&self, r: usize) -> String {
        format!("{PREFIX}{}h{r}", self.tag)
    }
    fn peer_veth(&self, r: usize) -> String {
        format!("{PREFIX}{}p{r}", self.tag)
    }
    fn bridge(&self) -> String {
        format!("{PREFIX}{}br", self.tag)
    }
}

fn is_tag(s: &str) -> bool {
    s.len() == 6
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_rank(s: &str) -> bool {
    !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `name` is one the driver creates: `rpr-<tag>-r<k>` (namespace),
/// `rpr<tag>h<k>` / `rpr<tag>p<k>` (veth ends) or `rpr<tag>br` (bridge).
pub fn is_our_name(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) {
        return rest.len() > 8
            && is_tag(&rest[..6])
            && rest[6..].starts_with("-r")
            && is_rank(&rest[8..]);
    }
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    if rest.len() < 8 || !is_tag(&rest[..6]) {
        return false;
    }
    let suffix = &rest[6..];
    suffix == "br" || suffix.strip_prefix(['h', 'p']).is_some_and(is_rank)
}

fn checked(name: String) -> Result<String, NetError> {
    if is_our_name(&name) {
        Ok(name)
    } else {
        Err(NetError::BadName { name })
    }
}

/// A namespace or link left behind (found by [`leftovers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Leftover {
    Namespace(String),
    Link(String),
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Namespace(n) => write!(f, "network namespace {n}"),
            Self::Link(n) => write!(f, "link {n}"),
        }
    }
}

/// Every namespace and link of this host whose name the driver creates.
pub fn leftovers(exec: &dyn Exec) -> Result<Vec<Leftover>, NetError> {
    let mut out = Vec::new();
    let netns = exec.run(&argv(&["ip", "netns", "list"]))?;
    for line in netns.lines() {
        if let Some(name) = line.split_whitespace().next()
            && is_our_name(name)
        {
            out.push(Leftover::Namespace(name.to_string()));
        }
    }
    let links = exec.run(&argv(&["ip", "-o", "link", "show"]))?;
    for line in links.lines() {
        // `7: rpr0a1b2ch0@if6: <BROADCAST,...`
        if let Some(name) = line
            .split(':')
            .nth(1)
            .map(|n| n.trim().split('@').next().unwrap_or(""))
            && is_our_name(name)
        {
            out.push(Leftover::Link(name.to_string()));
        }
    }
    Ok(out)
}

/// Removes leftovers (links first: deleting one end of a veth removes both).
/// Returns what could not be removed, with the reason.
pub fn remove_leftovers(exec: &dyn Exec, found: &[Leftover]) -> Vec<(Leftover, NetError)> {
    let mut failed = Vec::new();
    let mut ordered: Vec<&Leftover> = found
        .iter()
        .filter(|l| matches!(l, Leftover::Link(_)))
        .collect();
    ordered.extend(found.iter().filter(|l| matches!(l, Leftover::Namespace(_))));
    for l in ordered {
        let (name, cmd) = match l {
            Leftover::Link(n) => (n, vec!["ip", "link", "del", n.as_str()]),
            Leftover::Namespace(n) => (n, vec!["ip", "netns", "del", n.as_str()]),
        };
        if !is_our_name(name) {
            failed.push((l.clone(), NetError::BadName { name: name.clone() }));
            continue;
        }
        match exec.run(&argv(&cmd)) {
            Ok(_) => {}
            Err(NetError::Failed { stderr, .. }) if gone(&stderr) => {}
            Err(e) => failed.push((l.clone(), e)),
        }
    }
    failed
}

/// `ip`'s ways of saying that the thing to delete is already gone.
fn gone(stderr: &str) -> bool {
    stderr.contains("Cannot find device")
        || stderr.contains("No such file")
        || stderr.contains("does not exist")
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_string()).collect()
}

/// Bytes of the token bucket: 1 ms of traffic, at least two full frames.
/// Explicit, because the kernel's defaults undershoot at high rates; small,
/// because a bucket that holds a whole iteration's messages would let them
/// out at line rate (measured here: 1 ms reaches 850 Mbit/s of 1 Gbit/s
/// with one TCP stream, a 10 ms bucket no more).
pub fn burst_bytes(rate_bps: f64) -> u64 {
    ((rate_bps / 8.0 / 1000.0) as u64).max(2 * 1514)
}

/// Bytes the qdisc may queue: 100 ms of traffic, at least 256 KiB.
fn limit_bytes(rate_bps: f64) -> u64 {
    ((rate_bps / 8.0 / 10.0) as u64).max(256 * 1024)
}

/// Seconds as milliseconds without float noise (`0.13`, not `0.13000000000000003`).
fn ms(seconds: f64) -> f64 {
    (seconds * 1e9).round() / 1e6
}

/// A shaped network for one run; torn down when dropped (on success, on
/// failure, and when a signal stops the run).
pub struct Fabric<'e> {
    exec: &'e dyn Exec,
    names: Names,
    ranks: usize,
    octet: u8,
    condition: Condition,
    netem: bool,
    up: bool,
    /// Offload switches the kernel refused (the run goes on; recorded).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Fabric<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("tag", &self.names.tag)
            .field("ranks", &self.ranks)
            .field("condition", &self.condition)
            .field("netem", &self.netem)
            .field("up", &self.up)
            .finish()
    }
}

impl<'e> Fabric<'e> {
    /// Plans the network of run `run_id` (hex) for `ranks` ranks; `netem`:
    /// whether the kernel has netem (otherwise latency is left to the
    /// transport, see [`Fabric::injected_latency_s`]).
    pub fn new(
        exec: &'e dyn Exec,
        run_id: &str,
        ranks: usize,
        condition: Condition,
        netem: bool,
    ) -> Result<Self, NetError> {
        let tag: String = run_id.chars().take(6).collect();
        if !is_tag(&tag) {
            return Err(NetError::BadName {
                name: run_id.to_string(),
            });
        }
        if !(1..=250).contains(&ranks) {
            return Err(NetError::TooManyRanks { ranks });
        }
        // the subnet 10.217.X.0/24 with X from the run id, 1..=250
        let octet = (u32::from_str_radix(&tag, 16).unwrap_or(0) % 250 + 1) as u8;
        Ok(Self {
            exec,
            names: Names { tag },
            ranks,
            octet,
            condition,
            netem,
            up: false,
            warnings: Vec::new(),
        })
    }

    /// `10.217.X.0/24`.
    pub fn subnet(&self) -> String {
        format!("10.217.{}.0/24", self.octet)
    }

    /// What `repro net exec` appends the rank number to.
    pub fn namespace_prefix(&self) -> String {
        format!("{PREFIX}-{}-r", self.names.tag)
    }

    /// Latency the transport must add per message: the condition's latency
    /// when the kernel has no netem, else none.
    pub fn injected_latency_s(&self) -> Option<f64> {
        (!self.netem && self.condition.latency_s > 0.0).then_some(self.condition.latency_s)
    }

    /// How the condition is applied, in words (for the provenance).
    pub fn describe(&self) -> String {
        let rate = match self.condition.bandwidth_bps {
            Some(bps) => format!(
                "rate {} bit/s by {} (burst {} B) on each rank's veth",
                bps as u64,
                match self.condition.qdisc {
                    RateQdisc::Tbf => "tbf",
                    RateQdisc::Htb => "htb",
                    RateQdisc::HtbAck => "htb with pure ACKs first",
                },
                burst_bytes(bps)
            ),
            None => "rate unlimited".into(),
        };
        let latency = if self.condition.latency_s == 0.0 {
            "no added latency".to_string()
        } else if self.netem {
            format!("latency {} ms by netem", ms(self.condition.latency_s))
        } else {
            format!(
                "latency {} ms injected per message by the transport (this kernel has no netem)",
                ms(self.condition.latency_s)
            )
        };
        format!(
            "netns: {} ranks in namespaces {}0..{}; subnet {}; {rate}; {latency}; TCP {}",
            self.ranks,
            self.namespace_prefix(),
            self.ranks - 1,
            self.subnet(),
            self.condition.tcp.name()
        )
    }

    fn tc_commands(&self, ns: &str) -> Vec<Vec<String>> {
        let dev = "eth0";
        let tc = |rest: &[&str]| -> Vec<String> {
            let mut v = argv(&["tc", "-n", ns, "qdisc", "replace", "dev", dev]);
            v.extend(rest.iter().map(|s| (*s).to_string()));
            v
        };
        let delay = (self.netem && self.condition.latency_s > 0.0)
            .then(|| format!("{}us", (self.condition.latency_s * 1e6).round() as u64));
        let mut out = Vec::new();
        match (self.condition.bandwidth_bps, self.condition.qdisc) {
            (Some(bps), RateQdisc::Tbf) => {
                let rate = format!("{}bit", bps as u64);
                let burst = burst_bytes(bps).to_string();
                let limit = limit_bytes(bps).to_string();
                let tbf = ["tbf", "rate", &rate, "burst", &burst, "limit", &limit];
                match &delay {
                    // netem at the root, the token bucket as its child
                    Some(d) => {
                        out.push(tc(&[
                            "root", "handle", "1:", "netem", "delay", d, "limit", "100000",
                        ]));
                        let mut child = vec!["parent", "1:1", "handle", "10:"];
                        child.extend_from_slice(&tbf);
                        out.push(tc(&child));
                    }
                    None => {
                        let mut root = vec!["root", "handle", "1:"];
                        root.extend_from_slice(&tbf);
                        out.push(tc(&root));
                    }
                }
            }
            (Some(bps), RateQdisc::Htb) => {
                let rate = format!("{}bit", bps as u64);
                let burst = burst_bytes(bps).to_string();
                out.push(tc(&["root", "handle", "1:", "htb", "default", "1"]));
                out.push(argv(&[
                    "tc", "-n", ns, "class", "replace", "dev", dev, "parent", "1:", "classid",
                    "1:1", "htb", "rate", &rate, "ceil", &rate, "burst", &burst, "cburst", &burst,
                    "quantum", "1514",
                ]));
                if let Some(d) = &delay {
                    out.push(tc(&[
                        "parent", "1:1", "handle", "10:", "netem", "delay", d, "limit", "100000",
                    ]));
                }
            }
            (Some(bps), RateQdisc::HtbAck) => {
                // one rate for everything the rank sends, pure ACKs (IP
                // packets under 64 bytes) first: the ACKs of incoming data do
                // not wait behind outgoing data in the queue
                let rate = format!("{}bit", bps as u64);
                let half = format!("{}bit", (bps / 2.0) as u64);
                let burst = burst_bytes(bps).to_string();
                let class = |parent: &str, id: &str, r: &str, prio: &str| -> Vec<String> {
                    argv(&[
                        "tc", "-n", ns, "class", "replace", "dev", dev, "parent", parent,
                        "classid", id, "htb", "rate", r, "ceil", &rate, "burst", &burst, "cburst",
                        &burst, "quantum", "1514", "prio", prio,
                    ])
                };
                out.push(tc(&["root", "handle", "1:", "htb", "default", "20"]));
                out.push(class("1:", "1:1", &rate, "0"));
                out.push(class("1:1", "1:10", &half, "0"));
                out.push(class("1:1", "1:20", &half, "1"));
                out.push(argv(&[
                    "tc", "-n", ns, "filter", "replace", "dev", dev, "parent", "1:", "protocol",
                    "ip", "prio", "1", "u32", "match", "ip", "protocol", "6", "0xff", "match",
                    "u16", "0x0000", "0xffc0", "at", "2", "flowid", "1:10",
                ]));
                let limit = limit_bytes(bps).to_string();
                for (parent, handle) in [("1:10", "10:"), ("1:20", "20:")] {
                    match &delay {
                        Some(d) => out.push(tc(&[
                            "parent", parent, "handle", handle, "netem", "delay", d, "limit",
                            "100000",
                        ])),
                        None => out.push(tc(&[
                            "parent", parent, "handle", handle, "bfifo", "limit", &limit,
                        ])),
                    }
                }
            }
            (None, _) => {
                if let Some(d) = &delay {
                    out.push(tc(&[
                        "root", "handle", "1:", "netem", "delay", d, "limit", "100000",
                    ]));
                }
            }
        }
        out
    }

    /// The commands that build the network, in order.
    pub fn setup_commands(&self) -> Result<Vec<Vec<String>>, NetError> {
        let br = checked(self.names.bridge())?;
        let sub = self.octet;
        let mut out = vec![
            argv(&["ip", "link", "add", &br, "type", "bridge"]),
            argv(&[
                "ip",
                "addr",
                "add",
                &format!("10.217.{sub}.254/24"),
                "dev",
                &br,
            ]),
            argv(&["ip", "link", "set", &br, "up"]),
        ];
        for r in 0..self.ranks {
            let ns = checked(self.names.namespace(r))?;
            let hv = checked(self.names.host_veth(r))?;
            let pv = checked(self.names.peer_veth(r))?;
            let addr = format!("10.217.{sub}.{}/24", r + 1);
            out.extend([
                argv(&["ip", "netns", "add", &ns]),
                argv(&[
                    "ip", "link", "add", &hv, "mtu", "1500", "type", "veth", "peer", "name", &pv,
                    "mtu", "1500",
                ]),
                argv(&["ip", "link", "set", &pv, "netns", &ns]),
                argv(&["ip", "-n", &ns, "link", "set", &pv, "name", "eth0"]),
                argv(&["ip", "-n", &ns, "addr", "add", &addr, "dev", "eth0"]),
                argv(&["ip", "-n", &ns, "link", "set", "lo", "up"]),
                argv(&["ip", "-n", &ns, "link", "set", "eth0", "up"]),
                argv(&["ip", "link", "set", &hv, "master", &br]),
                argv(&["ip", "link", "set", &hv, "up"]),
                argv(&[
                    "ip",
                    "netns",
                    "exec",
                    &ns,
                    "sysctl",
                    "-q",
                    "-w",
                    &format!(
                        "net.ipv4.tcp_congestion_control={}",
                        self.condition.tcp.name()
                    ),
                ]),
            ]);
            out.extend(self.tc_commands(&ns));
        }
        Ok(out)
    }

    /// Offloads off on both ends of every veth, so the qdisc sees the real
    /// packets (segmentation offload would hand it 64 KiB super-packets).
    fn offload_commands(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for r in 0..self.ranks {
            let ns = self.names.namespace(r);
            let hv = self.names.host_veth(r);
            out.push(argv(&[
                "ethtool", "-K", &hv, "tso", "off", "gso", "off", "gro", "off",
            ]));
            out.push(argv(&[
                "ip", "netns", "exec", &ns, "ethtool", "-K", "eth0", "tso", "off", "gso", "off",
                "gro", "off",
            ]));
        }
        out
    }

    /// The commands that remove the network (each may find its target gone).
    pub fn teardown_commands(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = (0..self.ranks)
            .map(|r| argv(&["ip", "link", "del", &self.names.host_veth(r)]))
            .collect();
        out.extend(
            (0..self.ranks).map(|r| argv(&["ip", "netns", "del", &self.names.namespace(r)])),
        );
        out.push(argv(&["ip", "link", "del", &self.names.bridge()]));
        out
    }

    /// Builds the network. Refuses to touch names that already exist; on a
    /// failure half-way removes what it made.
    pub fn up(&mut self) -> Result<(), NetError> {
        let mine: Vec<String> = (0..self.ranks)
            .flat_map(|r| [self.names.namespace(r), self.names.host_veth(r)])
            .chain([self.names.bridge()])
            .collect();
        if let Some(l) = leftovers(self.exec)?.into_iter().find(|l| match l {
            Leftover::Namespace(n) | Leftover::Link(n) => mine.contains(n),
        }) {
            let (Leftover::Namespace(name) | Leftover::Link(name)) = l;
            return Err(NetError::Exists { name });
        }
        // another shaped network (another driver) may hold the subnet
        let addrs = self.exec.run(&argv(&["ip", "-o", "-4", "addr", "show"]))?;
        for _ in 0..250 {
            if !addrs.contains(&format!(" 10.217.{}.", self.octet)) {
                break;
            }
            self.octet = self.octet % 250 + 1;
        }
        self.up = true;
        for cmd in self.setup_commands()? {
            if let Err(e) = self.exec.run(&cmd) {
                self.down();
                return Err(e);
            }
        }
        for cmd in self.offload_commands() {
            if let Err(e) = self.exec.run(&cmd) {
                self.warnings.push(format!("offloads stay on: {e}"));
            }
        }
        Ok(())
    }

    /// Removes the network; returns the failures (already-gone is fine).
    pub fn down(&mut self) -> Vec<NetError> {
        if !self.up {
            return Vec::new();
        }
        self.up = false;
        let mut failed = Vec::new();
        for cmd in self.teardown_commands() {
            match self.exec.run(&cmd) {
                Ok(_) => {}
                Err(NetError::Failed { stderr, .. }) if gone(&stderr) => {}
                Err(e) => failed.push(e),
            }
        }
        failed
    }

    /// The root qdisc's counters of every rank's egress, in rank order.
    pub fn counters(&self) -> Result<Vec<QdiscStats>, NetError> {
        (0..self.ranks)
            .map(|r| {
                let ns = self.names.namespace(r);
                let out = self.exec.run(&argv(&[
                    "tc", "-n", &ns, "-s", "qdisc", "show", "dev", "eth0",
                ]))?;
                QdiscStats::parse(&out).ok_or(NetError::NoCounter {
                    namespace: ns,
                    device: "eth0".into(),
                })
            })
            .collect()
    }

    /// mpirun options that keep MPI's TCP transports and PMIx on the
    /// bridge's subnet, with shared memory off so nothing bypasses shaping.
    pub fn mpirun_args(&self) -> Vec<String> {
        let sub = self.subnet();
        argv(&[
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            &sub,
            "--mca",
            "oob_tcp_if_include",
            &sub,
        ])
    }

    /// Environment for mpirun (PMIx's server must listen on the bridge).
    pub fn mpirun_env(&self) -> Vec<(String, String)> {
        vec![("PMIX_MCA_ptl_tcp_if_include".into(), self.subnet())]
    }
}

impl Drop for Fabric<'_> {
    fn drop(&mut self) {
        for e in self.down() {
            eprintln!("warning: could not remove part of the shaped network: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::DryRun;

    fn condition(bw: Option<f64>, latency_s: f64, qdisc: RateQdisc) -> Condition {
        Condition {
            bandwidth_bps: bw,
            latency_s,
            qdisc,
            tcp: crate::net::TcpCongestion::Cubic,
            label: "test".into(),
        }
    }

    #[test]
    fn names_are_validated() {
        for ok in [
            "rpr-0a1b2c-r0",
            "rpr-0a1b2c-r249",
            "rpr0a1b2ch3",
            "rpr0a1b2cp12",
            "rpr0a1b2cbr",
        ] {
            assert!(is_our_name(ok), "{ok}");
        }
        for bad in [
            "eth0",
            "rpr",
            "rpr-0a1b2c-r",
            "rpr-0A1B2C-r0",
            "rpr0a1b2cx1",
            "rpr0a1b2ch",
            "rpr0a1b2ch1234",
            "rpr-0a1b2c-r1;reboot",
            "rpr0a1b2cbr0",
            "rpr-zzzzzz-r0",
        ] {
            assert!(!is_our_name(bad), "{bad}");
        }
        let exec = DryRun::default();
        let c = condition(Some(1e6), 0.0, RateQdisc::Tbf);
        assert!(matches!(
            Fabric::new(&exec, "$(reboot)", 2, c.clone(), false),
            Err(NetError::BadName { .. })
        ));
        assert!(matches!(
            Fabric::new(&exec, "abcdef012345", 251, c, false),
            Err(NetError::TooManyRanks { .. })
        ));
    }

    #[test]
    fn the_commands_are_pinned() {
        let exec = DryRun::default();
        let tbf = Fabric::new(
            &exec,
            "0a1b2c3d4e5f",
            2,
            condition(Some(1e8), 1e-3, RateQdisc::Tbf),
            false,
        )
        .unwrap();
        insta::assert_snapshot!(
            "tbf_no_netem",
            tbf.setup_commands()
                .unwrap()
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(tbf.injected_latency_s(), Some(1e-3));
        let netem = Fabric::new(
            &exec,
            "0a1b2c3d4e5f",
            1,
            condition(Some(2e7), 5e-4, RateQdisc::Tbf),
            true,
        )
        .unwrap();
        assert_eq!(netem.injected_latency_s(), None);
        let htb = Fabric::new(
            &exec,
            "0a1b2c3d4e5f",
            1,
            condition(Some(2e7), 5e-4, RateQdisc::Htb),
            true,
        )
        .unwrap();
        let delay = Fabric::new(
            &exec,
            "0a1b2c3d4e5f",
            1,
            condition(None, 0.15e-3, RateQdisc::Tbf),
            true,
        )
        .unwrap();
        let tc = |f: &Fabric<'_>| {
            f.setup_commands()
                .unwrap()
                .iter()
                .map(|c| c.join(" "))
                .filter(|c| c.starts_with("tc "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        insta::assert_snapshot!(
            "netem_kernels",
            format!("{}\n\n{}\n\n{}", tc(&netem), tc(&htb), tc(&delay))
        );
        let ack = |netem: bool| {
            let f = Fabric::new(
                &exec,
                "0a1b2c3d4e5f",
                1,
                condition(Some(5e6), 1e-3, RateQdisc::HtbAck),
                netem,
            )
            .unwrap();
            tc(&f)
        };
        insta::assert_snapshot!("htb_ack", format!("{}\n\n{}", ack(false), ack(true)));
        insta::assert_snapshot!(
            "teardown",
            tbf.teardown_commands()
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(tbf.subnet(), "10.217.67.0/24");
        assert_eq!(tbf.mpirun_env()[0].1, tbf.subnet());
    }

    #[test]
    fn up_refuses_leftovers_and_drop_tears_down() {
        let exec = DryRun::answering(|a| {
            if a.join(" ") == "ip netns list" {
                "rpr-0a1b2c-r1 (id: 3)\nother\n".into()
            } else {
                String::new()
            }
        });
        let c = condition(Some(1e8), 0.0, RateQdisc::Tbf);
        let mut f = Fabric::new(&exec, "0a1b2c3d4e5f", 2, c.clone(), false).unwrap();
        assert!(matches!(f.up(), Err(NetError::Exists { name }) if name == "rpr-0a1b2c-r1"));
        drop(f);
        assert!(!exec.commands().iter().any(|c| c.contains(" del ")));

        let exec = DryRun::default();
        {
            let mut f = Fabric::new(&exec, "0a1b2c3d4e5f", 2, c, false).unwrap();
            f.up().unwrap();
        }
        let cmds = exec.commands();
        assert!(
            cmds.iter()
                .any(|c| c == "ip link add rpr0a1b2cbr type bridge")
        );
        assert_eq!(cmds.last().unwrap(), "ip link del rpr0a1b2cbr");
        assert!(cmds.iter().any(|c| c == "ip netns del rpr-0a1b2c-r1"));
    }

    #[test]
    fn counters_and_leftovers_are_parsed() {
        let text = "qdisc tbf 8014: root refcnt 3 rate 50Mbit burst 64Kb lat 100ms \n Sent 26345 bytes 80 pkt (dropped 2, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n";
        assert_eq!(
            QdiscStats::parse(text),
            Some(QdiscStats {
                bytes: 26345,
                packets: 80,
                dropped: 2
            })
        );
        assert_eq!(QdiscStats::parse("qdisc noqueue 0: root"), None);
        let exec = DryRun::answering(|a| {
            match a.join(" ").as_str() {
            "ip netns list" => "rpr-0a1b2c-r0 (id: 0)\nrepro-doctor-1\n".into(),
            "ip -o link show" => "1: lo: <LOOPBACK>\n5: rpr0a1b2cbr: <BROADCAST>\n7: rpr0a1b2ch0@if6: <BROADCAST>\n8: rprx@if1: <>\n".into(),
            _ => String::new(),
        }
        });
        let found = leftovers(&exec).unwrap();
        assert_eq!(
            found,
            vec![
                Leftover::Namespace("rpr-0a1b2c-r0".into()),
                Leftover::Link("rpr0a1b2cbr".into()),
                Leftover::Link("rpr0a1b2ch0".into()),
            ]
        );
        assert!(remove_leftovers(&exec, &found).is_empty());
        let cmds = exec.commands();
        assert_eq!(
            &cmds[2..],
            [
                "ip link del rpr0a1b2cbr",
                "ip link del rpr0a1b2ch0",
                "ip netns del rpr-0a1b2c-r0"
            ]
        );
    }
}
