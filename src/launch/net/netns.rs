//! One host, real shaping: a network namespace per rank, a veth pair from
//! each into one bridge in a hub namespace, addresses from a private
//! subnet, and `tc` on every rank's side of its veth, so each rank's egress
//! is limited the way `tc` on each instance's NIC limited it in the paper.
//!
//! ```text
//!   rpr-<tag>-r0 [eth0 10.217.0.1] --veth-- rpr<tag>h0 --+
//!   rpr-<tag>-r1 [eth0 10.217.0.2] --veth-- rpr<tag>h1 --+-- br0 10.217.0.254
//!   ...                                                   |   in rpr-<tag>-hub, where
//!                                                         +   mpirun runs
//! ```
//!
//! Nothing of it lives in the host's own network namespace: mpirun runs in
//! the hub (`ip netns exec`), so the host's firewall (a FORWARD or INPUT
//! DROP policy, br_netfilter), its routes (another 10.217.0.0/24) and its
//! sysctls never see the ranks' traffic. Each rank's TCP congestion control
//! is set on its subnet route (`congctl lock`), which works whatever the
//! host's `tcp_allowed_congestion_control` says; the host's sysctls are
//! never written.

use serde::Serialize;

use super::exec::argv;
use super::{Condition, Exec, HostNet, NetError, PREFIX, RateQdisc, TcpCongestion};

mod shaping;
pub(crate) use shaping::*;

/// Packets and bytes a qdisc dequeued (what the rank really sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct QdiscStats {
    pub bytes: u64,
    pub packets: u64,
    pub dropped: u64,
}

impl QdiscStats {
    /// Parses the first `Sent <bytes> bytes <pkts> pkt (dropped <d>, ...` of
    /// `tc -s qdisc show` (the root qdisc comes first).
    pub(crate) fn parse(text: &str) -> Option<Self> {
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
    fn hub(&self) -> String {
        format!("{PREFIX}-{}-hub", self.tag)
    }
    /// Rank `r`'s veth end in the hub, enslaved to its bridge.
    fn hub_veth(&self, r: usize) -> String {
        format!("{PREFIX}{}h{r}", self.tag)
    }
}

/// The subnet of every shaped network. Each lives in its own namespaces,
/// so networks of concurrent runs do not collide, and nor does a route of
/// the host's to the same addresses.
pub(crate) const SUBNET: &str = "10.217.0.0/24";

/// The address of rank `r` (`None`: the hub's bridge, where mpirun listens).
fn address(r: Option<usize>) -> String {
    match r {
        Some(r) => format!("10.217.0.{}", r + 1),
        None => "10.217.0.254".into(),
    }
}

/// The bridge in the hub namespace and every rank's interface (fixed names
/// inside namespaces the driver made).
const BRIDGE: &str = "br0";
const RANK_DEV: &str = "eth0";

fn is_tag(s: &str) -> bool {
    s.len() == 6
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_rank(s: &str) -> bool {
    !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit())
}

/// A tag, then the rest (at least two bytes). By `get`, so a name that is
/// not ASCII (a character across byte 6) is simply not ours.
fn split_tag(rest: &str) -> Option<(&str, &str)> {
    let (tag, suffix) = (rest.get(..6)?, rest.get(6..)?);
    (rest.len() >= 8 && is_tag(tag)).then_some((tag, suffix))
}

/// Whether `name` is one the driver creates: `rpr-<tag>-r<k>` (a rank's
/// namespace), `rpr-<tag>-hub` (the hub), `rpr-<tag>-probe` (a throwaway
/// probe), or a link `rpr<tag>h<k>` / `rpr<tag>p<k>` / `rpr<tag>br` (veth
/// ends and bridges; only older versions left links in the host's
/// namespace).
pub(crate) fn is_our_name(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) {
        let Some((_, suffix)) = split_tag(rest) else {
            return false;
        };
        return match suffix {
            "-hub" | "-probe" => true,
            suffix => suffix.strip_prefix("-r").is_some_and(is_rank),
        };
    }
    let Some((_, suffix)) = name.strip_prefix(PREFIX).and_then(split_tag) else {
        return false;
    };
    suffix == "br" || suffix.strip_prefix(['h', 'p']).is_some_and(is_rank)
}

/// The tag of a name [`is_our_name`] accepts.
pub(crate) fn tag_in(name: &str) -> Option<&str> {
    let rest = name
        .strip_prefix(&format!("{PREFIX}-"))
        .or_else(|| name.strip_prefix(PREFIX))?;
    is_our_name(name).then(|| rest.get(..6)).flatten()
}

/// What [`remove_dead`] did.
#[derive(Debug)]
pub(crate) struct Tidied {
    /// What it tried to remove (those in `failed` are still there).
    pub removed: Vec<Leftover>,
    /// Names of live owners' networks, left alone.
    pub kept: Vec<Leftover>,
    pub failed: Vec<(Leftover, NetError)>,
}

/// Removes the networks whose owner is gone or unrecorded (with `force`,
/// live ones too), and their owner records once all of it is gone.
pub(crate) fn remove_dead(exec: &dyn Exec, force: bool) -> Result<Tidied, NetError> {
    let (removed, kept): (Vec<Leftover>, Vec<Leftover>) = leftovers(exec)?
        .into_iter()
        .partition(|l| force || !l.tag().is_some_and(super::owner::live));
    let failed = remove_leftovers(exec, &removed);
    if failed.is_empty() {
        let mut tags: Vec<&str> = removed.iter().filter_map(Leftover::tag).collect();
        tags.sort_unstable();
        tags.dedup();
        for t in tags {
            exec.release(t);
        }
    }
    Ok(Tidied {
        removed,
        kept,
        failed,
    })
}

/// What a killed driver left, removed before a shaped run ([`remove_dead`]
/// without force; never a live run's network). What could not be removed
/// is an error.
pub(crate) fn reclaim(exec: &dyn Exec) -> Result<Vec<Leftover>, NetError> {
    let tidied = remove_dead(exec, false)?;
    if let Some((_, e)) = tidied.failed.into_iter().next() {
        return Err(e);
    }
    Ok(tidied.removed)
}

/// The six-hex-digit tag of names made for `seed` (a run id, or a number).
pub(crate) fn tag_of(seed: &str) -> Option<String> {
    let tag: String = seed.chars().take(6).collect();
    is_tag(&tag).then_some(tag)
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
pub(crate) enum Leftover {
    Namespace(String),
    Link(String),
}

impl Leftover {
    /// The name.
    pub(crate) fn name(&self) -> &str {
        match self {
            Self::Namespace(n) | Self::Link(n) => n,
        }
    }

    /// The tag of its network.
    pub(crate) fn tag(&self) -> Option<&str> {
        tag_in(self.name())
    }
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
pub(crate) fn leftovers(exec: &dyn Exec) -> Result<Vec<Leftover>, NetError> {
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
pub(crate) fn remove_leftovers(exec: &dyn Exec, found: &[Leftover]) -> Vec<(Leftover, NetError)> {
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

/// A shaped network for one run; torn down when dropped (on success, on
/// failure, and when a signal stops the run).
pub(crate) struct Fabric<'e> {
    exec: &'e dyn Exec,
    names: Names,
    ranks: usize,
    condition: Condition,
    host: HostNet,
    up: bool,
    /// Offload switches the kernel refused (the run goes on; recorded).
    pub warnings: Vec<String>,
    /// Rank 0's subnet route as the kernel shows it after setup (with its
    /// `congctl`), for the provenance.
    pub route: String,
    /// Whether this process holds the owner record of its tag.
    claimed: bool,
}

impl std::fmt::Debug for Fabric<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("tag", &self.names.tag)
            .field("ranks", &self.ranks)
            .field("condition", &self.condition)
            .field("host", &self.host)
            .field("up", &self.up)
            .finish()
    }
}

impl<'e> Fabric<'e> {
    /// Plans the network of run `run_id` (hex) for `ranks` ranks on a host
    /// whose kernel is described by `host` (netem or not: without it the
    /// latency is left to the transport, see [`Fabric::injected_latency_s`]).
    pub(crate) fn new(
        exec: &'e dyn Exec,
        run_id: &str,
        ranks: usize,
        condition: Condition,
        host: &HostNet,
    ) -> Result<Self, NetError> {
        let tag = tag_of(run_id).ok_or_else(|| NetError::BadName {
            name: run_id.to_string(),
        })?;
        if !(1..=super::MAX_SHAPED_RANKS).contains(&ranks) {
            return Err(NetError::TooManyRanks { ranks });
        }
        Ok(Self {
            exec,
            names: Names { tag },
            ranks,
            condition,
            host: host.clone(),
            up: false,
            warnings: Vec::new(),
            route: String::new(),
            claimed: false,
        })
    }

    /// Takes a tag no live network uses and records this process as its
    /// owner: the run id's, else one derived from it and this process, so
    /// two runs of the same configuration never share names.
    fn claim_tag(&mut self) -> Result<(), NetError> {
        let taken = leftovers(self.exec)?;
        let seed = self.names.tag.clone();
        for attempt in 0u32..64 {
            let tag = if attempt == 0 {
                seed.clone()
            } else {
                let text = format!("{seed}:{}:{attempt}", std::process::id());
                format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))[..6].to_string()
            };
            if taken.iter().any(|l| l.tag() == Some(tag.as_str())) {
                continue;
            }
            if self.exec.claim(&tag)? {
                self.names.tag = tag;
                self.claimed = true;
                return Ok(());
            }
        }
        Err(NetError::Exists {
            name: format!("{PREFIX}-{seed}-* (and 63 other tags)"),
        })
    }

    /// `10.217.0.0/24`.
    pub(crate) fn subnet(&self) -> String {
        SUBNET.into()
    }

    /// What `repro net exec` appends the rank number to.
    pub(crate) fn namespace_prefix(&self) -> String {
        format!("{PREFIX}-{}-r", self.names.tag)
    }

    /// The hub namespace, where mpirun runs.
    pub(crate) fn hub(&self) -> String {
        self.names.hub()
    }

    /// Latency the transport must add per message: the condition's latency
    /// when the kernel has no netem, else none.
    pub(crate) fn injected_latency_s(&self) -> Option<f64> {
        (!self.host.netem && self.condition.latency_s > 0.0).then_some(self.condition.latency_s)
    }

    /// How the condition is applied, in words (for the provenance).
    pub(crate) fn describe(&self) -> String {
        let rate = match self.condition.bandwidth_bps {
            Some(bps) => format!(
                "rate {} bit/s by {} (burst {} B) on each rank's veth",
                bps as u64,
                self.condition.qdisc.describe(),
                burst_bytes(bps)
            ),
            None => "rate unlimited".into(),
        };
        let latency = if self.condition.latency_s == 0.0 {
            "no added latency".to_string()
        } else if self.host.netem {
            format!("latency {} ms by netem", ms(self.condition.latency_s))
        } else {
            format!(
                "latency {} ms injected per message by the transport (this kernel has no netem)",
                ms(self.condition.latency_s)
            )
        };
        format!(
            "netns: {} ranks in namespaces {}0..{}, mpirun in {}; subnet {}; {rate}; {latency}; \
             TCP {} (congctl on each rank's route)",
            self.ranks,
            self.namespace_prefix(),
            self.ranks - 1,
            self.hub(),
            self.subnet(),
            self.condition.tcp.name()
        )
    }

    /// The commands that build the network, in order.
    pub(crate) fn setup_commands(&self) -> Result<Vec<Vec<String>>, NetError> {
        let hub = checked(self.names.hub())?;
        let mut out = vec![
            argv(&["ip", "netns", "add", &hub]),
            argv(&["ip", "-n", &hub, "link", "set", "lo", "up"]),
            argv(&["ip", "-n", &hub, "link", "add", BRIDGE, "type", "bridge"]),
            argv(&[
                "ip",
                "-n",
                &hub,
                "addr",
                "add",
                &format!("{}/24", address(None)),
                "dev",
                BRIDGE,
            ]),
            argv(&["ip", "-n", &hub, "link", "set", BRIDGE, "up"]),
        ];
        for r in 0..self.ranks {
            let ns = checked(self.names.namespace(r))?;
            let hv = checked(self.names.hub_veth(r))?;
            let src = address(Some(r));
            out.extend([
                argv(&["ip", "netns", "add", &ns]),
                argv(&[
                    "ip", "-n", &hub, "link", "add", &hv, "mtu", "1500", "type", "veth", "peer",
                    "name", RANK_DEV, "mtu", "1500", "netns", &ns,
                ]),
                argv(&["ip", "-n", &hub, "link", "set", &hv, "master", BRIDGE]),
                argv(&["ip", "-n", &hub, "link", "set", &hv, "up"]),
            ]);
            if self.host.ipv6 {
                // no link-local address: no router solicitations or MLD
                // reports in the rank's qdisc counters
                out.push(argv(&[
                    "ip",
                    "-n",
                    &ns,
                    "link",
                    "set",
                    RANK_DEV,
                    "addrgenmode",
                    "none",
                ]));
            }
            out.extend([
                argv(&[
                    "ip",
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{src}/24"),
                    "dev",
                    RANK_DEV,
                ]),
                argv(&["ip", "-n", &ns, "link", "set", "lo", "up"]),
                argv(&["ip", "-n", &ns, "link", "set", RANK_DEV, "up"]),
                congctl_command(&ns, &src, self.condition.tcp),
            ]);
            out.extend(rate_commands(
                Some(&ns),
                RANK_DEV,
                &self.condition,
                self.host.netem,
            ));
        }
        Ok(out)
    }

    /// Offloads off on both ends of every veth, so the qdisc sees the real
    /// packets (segmentation offload would hand it 64 KiB super-packets).
    fn offload_commands(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for r in 0..self.ranks {
            for (ns, dev) in [
                (self.names.hub(), self.names.hub_veth(r)),
                (self.names.namespace(r), RANK_DEV.to_string()),
            ] {
                out.push(argv(&[
                    "ip", "netns", "exec", &ns, "ethtool", "-K", &dev, "tso", "off", "gso", "off",
                    "gro", "off",
                ]));
            }
        }
        out
    }

    /// The commands that remove the network (each may find its target
    /// gone): deleting a namespace deletes its veth ends, and their peers.
    pub(crate) fn teardown_commands(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = (0..self.ranks)
            .map(|r| argv(&["ip", "netns", "del", &self.names.namespace(r)]))
            .collect();
        out.push(argv(&["ip", "netns", "del", &self.names.hub()]));
        out
    }

    /// Builds the network. Refuses to touch names that already exist; on a
    /// failure half-way removes what it made. Checks that every rank's
    /// route carries the condition's congestion control.
    pub(crate) fn up(&mut self) -> Result<(), NetError> {
        self.claim_tag()?;
        let mine: Vec<String> = (0..self.ranks)
            .map(|r| self.names.namespace(r))
            .chain([self.names.hub()])
            .collect();
        if let Some(l) = leftovers(self.exec)?.into_iter().find(|l| match l {
            Leftover::Namespace(n) | Leftover::Link(n) => mine.contains(n),
        }) {
            let (Leftover::Namespace(name) | Leftover::Link(name)) = l;
            return Err(NetError::Exists { name });
        }
        self.up = true;
        let built = self.setup_commands().and_then(|cmds| {
            for cmd in cmds {
                self.exec.run(&cmd)?;
            }
            self.check_routes()
        });
        if let Err(e) = built {
            self.down();
            return Err(e);
        }
        for cmd in self.offload_commands() {
            if let Err(e) = self.exec.run(&cmd) {
                self.warnings.push(format!("offloads stay on: {e}"));
            }
        }
        Ok(())
    }

    /// Reads every rank's subnet route back and checks its `congctl`.
    fn check_routes(&mut self) -> Result<(), NetError> {
        for r in 0..self.ranks {
            let ns = self.names.namespace(r);
            let route = self
                .exec
                .run(&argv(&["ip", "-n", &ns, "route", "show", SUBNET]))?;
            if !route_has_congctl(&route, self.condition.tcp) {
                return Err(NetError::CongctlMissing {
                    namespace: ns,
                    tcp: self.condition.tcp.name().into(),
                    route: route.trim().to_string(),
                });
            }
            if r == 0 {
                self.route = route.trim().to_string();
            }
        }
        Ok(())
    }

    /// Removes the network; returns the failures (already-gone is fine).
    pub(crate) fn down(&mut self) -> Vec<NetError> {
        let mut failed = Vec::new();
        if self.up {
            self.up = false;
            for cmd in self.teardown_commands() {
                match self.exec.run(&cmd) {
                    Ok(_) => {}
                    Err(NetError::Failed { stderr, .. }) if gone(&stderr) => {}
                    Err(e) => failed.push(e),
                }
            }
        }
        // the record goes with the network (kept if part of it stayed:
        // then `repro net status` still names this process)
        if self.claimed && failed.is_empty() {
            self.claimed = false;
            self.exec.release(&self.names.tag);
        }
        failed
    }

    /// The root qdisc's counters of every rank's egress, in rank order.
    pub(crate) fn counters(&self) -> Result<Vec<QdiscStats>, NetError> {
        (0..self.ranks)
            .map(|r| {
                let ns = self.names.namespace(r);
                let out = self.exec.run(&argv(&[
                    "tc", "-n", &ns, "-s", "qdisc", "show", "dev", RANK_DEV,
                ]))?;
                QdiscStats::parse(&out).ok_or(NetError::NoCounter {
                    namespace: ns,
                    device: RANK_DEV.into(),
                })
            })
            .collect()
    }

    /// What starts mpirun inside the hub namespace.
    pub(crate) fn mpirun_prefix(&self) -> Vec<String> {
        argv(&["ip", "netns", "exec", &self.names.hub()])
    }

    /// mpirun options that keep MPI's TCP transports and PMIx on the
    /// subnet, with shared memory off so nothing bypasses shaping.
    pub(crate) fn mpirun_args(&self) -> Vec<String> {
        argv(&[
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            SUBNET,
            "--mca",
            "oob_tcp_if_include",
            SUBNET,
        ])
    }

    /// Environment for mpirun (PMIx's server must listen on the bridge).
    pub(crate) fn mpirun_env(&self) -> Vec<(String, String)> {
        vec![("PMIX_MCA_ptl_tcp_if_include".into(), SUBNET.into())]
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
mod tests;
