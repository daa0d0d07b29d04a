//! The tc commands that shape a link: a token bucket, or htb with its
//! ACK class, and the congestion control set on a route.

use super::*;

/// Bytes of the token bucket: 1 ms of traffic, at least two full frames.
/// Explicit, because the kernel's defaults undershoot at high rates; small,
/// because a bucket that holds a whole iteration's messages would let them
/// out at line rate (measured here: 1 ms reaches 850 Mbit/s of 1 Gbit/s
/// with one TCP stream, a 10 ms bucket no more).
pub(crate) fn burst_bytes(rate_bps: f64) -> u64 {
    ((rate_bps / 8.0 / 1000.0) as u64).max(2 * 1514)
}

/// Bytes the qdisc may queue: 100 ms of traffic, at least 256 KiB.
pub(super) fn limit_bytes(rate_bps: f64) -> u64 {
    ((rate_bps / 8.0 / 10.0) as u64).max(256 * 1024)
}

/// Seconds as milliseconds without float noise (`0.13`, not `0.13000000000000003`).
pub(super) fn ms(seconds: f64) -> f64 {
    (seconds * 1e9).round() / 1e6
}

/// The `tc` commands that put `condition` on `dev`'s egress (in namespace
/// `ns`, or the current one): the rate by `tbf`, `htb` or `htb-ack`, the
/// latency by netem where `netem` (else nothing: the transport injects it).
/// One definition for the ranks' namespaces, the probes and a cluster's
/// nodes without netem.
pub(crate) fn rate_commands(
    ns: Option<&str>,
    dev: &str,
    condition: &Condition,
    netem: bool,
) -> Vec<Vec<String>> {
    let tc = Tc { ns, dev };
    let delay = (netem && condition.latency_s > 0.0)
        .then(|| format!("{}us", (condition.latency_s * 1e6).round() as u64));
    let delay = delay.as_deref();
    match (condition.bandwidth_bps, condition.qdisc) {
        (Some(bps), RateQdisc::Tbf) => tbf_commands(&tc, bps, delay),
        (Some(bps), RateQdisc::Htb) => htb_commands(&tc, bps, delay),
        (Some(bps), RateQdisc::HtbAck) => htb_ack_commands(&tc, bps, delay),
        (None, _) => delay
            .map(|d| {
                tc.qdisc(&[
                    "root", "handle", "1:", "netem", "delay", d, "limit", "100000",
                ])
            })
            .into_iter()
            .collect(),
    }
}

/// `tc` on one device, in a namespace or the current one.
pub(super) struct Tc<'a> {
    pub(super) ns: Option<&'a str>,
    pub(super) dev: &'a str,
}

impl Tc<'_> {
    /// `tc [-n NS] OBJECT replace dev DEV REST...`.
    pub(super) fn command(&self, object: &str, rest: &[&str]) -> Vec<String> {
        let mut v = argv(&["tc"]);
        if let Some(ns) = self.ns {
            v.extend(argv(&["-n", ns]));
        }
        v.extend(argv(&[object, "replace", "dev", self.dev]));
        v.extend(argv(rest));
        v
    }

    pub(super) fn qdisc(&self, rest: &[&str]) -> Vec<String> {
        self.command("qdisc", rest)
    }
}

/// A token bucket at `bps`; with a `delay`, netem at the root and the
/// bucket as its child.
pub(super) fn tbf_commands(tc: &Tc<'_>, bps: f64, delay: Option<&str>) -> Vec<Vec<String>> {
    let rate = format!("{}bit", bps as u64);
    let burst = burst_bytes(bps).to_string();
    let limit = limit_bytes(bps).to_string();
    let tbf = ["tbf", "rate", &rate, "burst", &burst, "limit", &limit];
    match delay {
        Some(d) => vec![
            tc.qdisc(&[
                "root", "handle", "1:", "netem", "delay", d, "limit", "100000",
            ]),
            tc.qdisc(&[&["parent", "1:1", "handle", "10:"][..], &tbf].concat()),
        ],
        None => vec![tc.qdisc(&[&["root", "handle", "1:"][..], &tbf].concat())],
    }
}

/// One htb class at `bps`; with a `delay`, netem as its leaf.
pub(super) fn htb_commands(tc: &Tc<'_>, bps: f64, delay: Option<&str>) -> Vec<Vec<String>> {
    let rate = format!("{}bit", bps as u64);
    let burst = burst_bytes(bps).to_string();
    let mut out = vec![
        tc.qdisc(&["root", "handle", "1:", "htb", "default", "1"]),
        tc.command(
            "class",
            &[
                "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "ceil", &rate, "burst",
                &burst, "cburst", &burst, "quantum", "1514",
            ],
        ),
    ];
    if let Some(d) = delay {
        out.push(tc.qdisc(&[
            "parent", "1:1", "handle", "10:", "netem", "delay", d, "limit", "100000",
        ]));
    }
    out
}

/// One rate for everything the rank sends, pure ACKs (IP packets under 64
/// bytes) first: the ACKs of incoming data do not wait behind outgoing
/// data in the queue. Each class's leaf is netem with a `delay`, else a
/// byte FIFO.
pub(super) fn htb_ack_commands(tc: &Tc<'_>, bps: f64, delay: Option<&str>) -> Vec<Vec<String>> {
    let rate = format!("{}bit", bps as u64);
    let half = format!("{}bit", (bps / 2.0) as u64);
    let burst = burst_bytes(bps).to_string();
    let class = |parent: &str, id: &str, r: &str, prio: &str| {
        tc.command(
            "class",
            &[
                "parent", parent, "classid", id, "htb", "rate", r, "ceil", &rate, "burst", &burst,
                "cburst", &burst, "quantum", "1514", "prio", prio,
            ],
        )
    };
    let mut out = vec![
        tc.qdisc(&["root", "handle", "1:", "htb", "default", "20"]),
        class("1:", "1:1", &rate, "0"),
        class("1:1", "1:10", &half, "0"),
        class("1:1", "1:20", &half, "1"),
        tc.command(
            "filter",
            &[
                "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "protocol",
                "6", "0xff", "match", "u16", "0x0000", "0xffc0", "at", "2", "flowid", "1:10",
            ],
        ),
    ];
    let limit = limit_bytes(bps).to_string();
    for (parent, handle) in [("1:10", "10:"), ("1:20", "20:")] {
        out.push(match delay {
            Some(d) => tc.qdisc(&[
                "parent", parent, "handle", handle, "netem", "delay", d, "limit", "100000",
            ]),
            None => tc.qdisc(&["parent", parent, "handle", handle, "bfifo", "limit", &limit]),
        });
    }
    out
}

/// The command that sets `tcp` on the subnet route of namespace `ns`
/// (source address `src`): every connection over it, opened or accepted,
/// uses that congestion control, and `lock` keeps a socket from changing
/// it. A route's `congctl` is not limited to the host's
/// `tcp_allowed_congestion_control`, unlike a namespace's default.
pub(crate) fn congctl_command(ns: &str, src: &str, tcp: TcpCongestion) -> Vec<String> {
    argv(&[
        "ip",
        "-n",
        ns,
        "route",
        "replace",
        SUBNET,
        "dev",
        RANK_DEV,
        "proto",
        "kernel",
        "scope",
        "link",
        "src",
        src,
        "congctl",
        "lock",
        tcp.name(),
    ])
}

/// Whether `ip route show` printed a route with `congctl lock <tcp>`.
pub(crate) fn route_has_congctl(route: &str, tcp: TcpCongestion) -> bool {
    let words: Vec<&str> = route.split_whitespace().collect();
    words
        .windows(3)
        .any(|w| w == ["congctl", "lock", tcp.name()])
}
