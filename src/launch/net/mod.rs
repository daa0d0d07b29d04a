//! Network conditions and the shaping that makes them real: one network
//! namespace per rank, veth pairs into a bridge, `tc` on every rank's egress,
//! and the kernel's byte counters read back after the run.
//!
//! Every name created here is `rpr` + six hex digits of the run id + a fixed
//! suffix, built from validated parts only: nothing from a manifest reaches
//! `ip` or `tc` except numbers this module formats itself.

pub(crate) mod exec;
pub(crate) mod hosts;
pub(crate) mod netns;
pub(crate) mod owner;
pub(crate) mod probe;

use thiserror::Error;

use crate::experiment::condition::{Condition, RateQdisc, TcpCongestion};

pub(crate) use exec::{DryRun, Exec, System};
pub(crate) use hosts::{HostShaping, NodeCondition, NodeOwner};
pub(crate) use netns::{Fabric, QdiscStats, leftovers, reclaim, remove_dead};
pub(crate) use probe::{HostNet, TcpSettings};

/// The fixed prefix of every namespace, link and bridge the driver creates.
pub(crate) const PREFIX: &str = "rpr";

/// The most ranks one shaped network (one host's namespaces) holds.
pub(crate) const MAX_SHAPED_RANKS: usize = 250;

/// A failure of network shaping.
#[derive(Debug, Error)]
pub(crate) enum NetError {
    #[error(
        "could not start `{program}`: {source}; install iproute2 and ethtool (ci/setup.sh does)"
    )]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`{name}` already exists, left behind by an earlier run; `repro net down` removes it")]
    Exists { name: String },
    #[error(
        "shaping the network needs root (network namespaces and tc); run as root, or pass \
         `--set shaping=none` to run unshaped (the network condition is then not applied)"
    )]
    NotRoot,
    #[error("refusing to pass `{name}` to ip/tc: it is not a name this driver creates")]
    BadName { name: String },
    #[error(
        "TCP congestion control `{name}` is not available on this host \
         (net.ipv4.tcp_available_congestion_control = `{available}`); load it \
         (`modprobe tcp_{name}`) or set the network condition's `tcp` to one of those"
    )]
    TcpUnavailable { name: String, available: String },
    #[error(
        "this kernel would not set TCP congestion control `{name}` on a route in a network \
         namespace ({reason}), which is how repro applies a condition's `tcp` without \
         touching the host; a namespace's default can only be one of \
         net.ipv4.tcp_allowed_congestion_control (`{allowed}`): set the condition's `tcp` \
         to one of those"
    )]
    TcpRefused {
        name: String,
        allowed: String,
        reason: String,
    },
    #[error(
        "rank namespace {namespace}: its subnet route does not carry `congctl lock {tcp}` \
         after setup (it reads `{route}`); this kernel ignores a route's congestion control"
    )]
    CongctlMissing {
        namespace: String,
        tcp: String,
        route: String,
    },
    #[error(
        "this kernel refused the qdiscs of network condition `{condition}`: `{command}`: \
         {reason}; `repro doctor` shows which qdiscs work here; set the condition's `qdisc` \
         to one that does (tbf, htb, htb-ack)"
    )]
    QdiscRefused {
        condition: String,
        command: String,
        reason: String,
    },
    #[error(
        "{interface}: hosts shaping replaces the root qdisc and would not put this one back \
         exactly: {reason}; remove it (`tc qdisc del dev {interface} root`) or run with \
         `--set shaping=none`"
    )]
    NodeUnrestorable { interface: String, reason: String },
    #[error("{interface}: {reason}")]
    NodeQdisc { interface: String, reason: String },
    #[error("refusing to touch {interface}: {reason}")]
    InterfaceBusy { interface: String, reason: String },
    #[error("`{flag} {value}` is not a value `repro net node` knows")]
    BadNodeFlag { flag: String, value: String },
    #[error("could not read the TCP congestion-control sysctls under /proc/sys/net/ipv4")]
    NoTcpSysctls,
    #[error("{ranks} ranks do not fit one shaped network (1 to {MAX_SHAPED_RANKS})")]
    TooManyRanks { ranks: usize },
    #[error("`tc -s qdisc` on {device} in {namespace} printed no byte counter")]
    NoCounter { namespace: String, device: String },
    #[error(
        "no MPI rank number in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK); \
         `repro net exec` is started by mpirun for each rank"
    )]
    NoRank,
    #[error(
        "`{name}` is not an interface name (1 to 15 letters, digits, `_`, `.`, `-`); \
         pass the nodes' interface with `--interface`, e.g. `--interface eth0`"
    )]
    BadInterface { name: String },
    #[error(
        "`shaping: hosts` shapes the interface of every node and needs `--interface IFACE` \
         (the NIC the ranks talk over; it is never guessed)"
    )]
    NoInterface,
    #[error(
        "`shaping: {mode}` does not work with this launcher: netns builds namespaces on this \
         host (launch locally), hosts shapes each node (launch with --hostfile or srun); or \
         pass `--set shaping=none`"
    )]
    ShapingLauncher { mode: String },
}

/// The rank number mpirun gave this process.
pub(crate) fn rank_from_env() -> Result<usize, NetError> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
        .ok_or(NetError::NoRank)
}
