//! Network conditions as a manifest writes them: a rate, a one-way latency,
//! the qdisc and TCP congestion control that realise them, and how they are
//! made real (the shaping mode).

use serde::{Deserialize, Serialize};
use yaml_serde::Value;

/// The queueing discipline that limits the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RateQdisc {
    /// A token bucket: every packet in one FIFO, so the ACKs of incoming
    /// data wait behind outgoing data.
    Tbf,
    /// An htb class: every packet in one FIFO.
    Htb,
    /// htb with two classes under the rate, pure TCP ACKs first, then data:
    /// the link sends at the rate in both directions at once (the default).
    #[default]
    HtbAck,
}

impl RateQdisc {
    pub(crate) const ALL: [RateQdisc; 3] = [Self::Tbf, Self::Htb, Self::HtbAck];

    /// The name a manifest and `repro net node up --qdisc` write.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Tbf => "tbf",
            Self::Htb => "htb",
            Self::HtbAck => "htb-ack",
        }
    }

    /// The qdisc `name` spells, if any.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|q| q.name() == name)
    }

    /// How it shapes, in words (runs.csv's `shaping`, shaping.json).
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::HtbAck => "htb with pure ACKs first",
            other => other.name(),
        }
    }
}

/// One network condition: egress rate and one-way latency per worker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Condition {
    /// Bits per second; `None`: unlimited.
    pub bandwidth_bps: Option<f64>,
    /// Seconds added to every message.
    pub latency_s: f64,
    pub qdisc: RateQdisc,
    /// TCP congestion control in the ranks' namespaces.
    pub tcp: TcpCongestion,
    /// As written (`100mbit/1ms`), for tables and figures.
    pub label: String,
}

/// The TCP congestion control each rank's namespace uses (a fixed list:
/// nothing else reaches `sysctl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TcpCongestion {
    /// Linux's default, and what the paper's Ubuntu 16.04 hosts ran. The
    /// default here, whatever the host uses: BBR's pacing of the bursty,
    /// application-limited traffic of synchronous SGD was measured 28% slower
    /// than the wire-time bound where cubic met it (d-psgd, 5 Mbit/s).
    #[default]
    Cubic,
    Reno,
    Bbr,
}

impl TcpCongestion {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Cubic => "cubic",
            Self::Reno => "reno",
            Self::Bbr => "bbr",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    #[serde(default)]
    bandwidth: Option<String>,
    #[serde(default)]
    latency: Option<String>,
    #[serde(default)]
    qdisc: RateQdisc,
    #[serde(default)]
    tcp: TcpCongestion,
    /// The model the bandwidth is stated for (the paper's: `resnet20`):
    /// the run gets `bandwidth` times its own model's size over this one's,
    /// so its messages take as long on the wire as the paper's did.
    #[serde(default)]
    paper_model: Option<String>,
    /// The data `paper_model` ran on (default `cifar10`).
    #[serde(default)]
    paper_dataset: Option<String>,
}

impl Condition {
    /// `none`, or a mapping `{bandwidth: 100mbit, latency: 1ms, qdisc: tbf}`
    /// (every key optional). `Ok(None)`: no shaping. Errors name the key.
    /// `ours` is the run's model size in parameters, which a condition with
    /// `paper_model` scales its bandwidth by.
    pub(crate) fn from_yaml(
        value: &Value,
        ours: Option<u64>,
    ) -> Result<Option<Self>, (String, String)> {
        if matches!(value, Value::Null) || value.as_str() == Some("none") {
            return Ok(None);
        }
        if value.is_string() {
            return Err((
                String::new(),
                "a network condition is `none` or a mapping like {bandwidth: 100mbit, latency: 1ms}"
                    .into(),
            ));
        }
        let raw: RawCondition = serde_path_to_error::deserialize(value.clone())
            .map_err(|e| (e.path().to_string(), e.inner().to_string()))?;
        let bandwidth_bps = match &raw.bandwidth {
            Some(b) => Some(parse_bandwidth(b).ok_or_else(|| {
                (
                    "bandwidth".to_string(),
                    format!("`{b}` is not a rate like `100mbit`, `1.5gbit` or `800kbit`"),
                )
            })?),
            None => None,
        };
        let latency_s = match &raw.latency {
            Some(l) => parse_latency(l).ok_or_else(|| {
                (
                    "latency".to_string(),
                    format!("`{l}` is not a latency like `1ms`, `0.15ms` or `20us`"),
                )
            })?,
            None => 0.0,
        };
        let bandwidth_bps = scaled(&raw, bandwidth_bps, ours)?;
        if bandwidth_bps.is_none() && latency_s == 0.0 {
            return Ok(None);
        }
        let label = label(&raw);
        Ok(Some(Self {
            bandwidth_bps,
            latency_s,
            qdisc: raw.qdisc,
            tcp: raw.tcp,
            label,
        }))
    }
}

/// The condition's bandwidth, scaled from the paper's model to ours
/// (`ours` parameters) where it names `paper_model`.
fn scaled(
    raw: &RawCondition,
    bandwidth_bps: Option<f64>,
    ours: Option<u64>,
) -> Result<Option<f64>, (String, String)> {
    Ok(match (&raw.paper_model, bandwidth_bps) {
        (None, b) => b,
        (Some(_), None) => {
            return Err((
                "paper_model".into(),
                "scales a bandwidth: give `bandwidth` too".into(),
            ));
        }
        (Some(model), Some(b)) => {
            let dataset = raw.paper_dataset.as_deref().unwrap_or("cifar10");
            let theirs = repro_runlog::model_parameters(model, dataset).ok_or_else(|| {
                (
                    "paper_model".to_string(),
                    format!(
                        "no parameter count for `{model}` on `{dataset}`; known: {}",
                        repro_runlog::MODEL_PARAMETERS
                            .iter()
                            .map(|(m, d, _)| format!("{m}/{d}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
            let ours = ours.ok_or_else(|| {
                (
                    "paper_model".to_string(),
                    "the run's model size is unknown, so its bandwidth cannot be scaled".into(),
                )
            })?;
            Some(b * ours as f64 / theirs as f64)
        }
    })
}

/// A condition's label: every field that makes a different condition.
fn label(raw: &RawCondition) -> String {
    // every field that makes a different condition is in the label, so
    // two conditions never share a table row: qdisc and tcp where they
    // are not the default
    let mut parts = Vec::new();
    if let Some(b) = &raw.bandwidth {
        parts.push(match &raw.paper_model {
            Some(m) => format!("{}@{m}", b.trim()),
            None => b.trim().to_string(),
        });
    }
    if let Some(l) = &raw.latency {
        parts.push(l.trim().to_string());
    }
    if raw.qdisc != RateQdisc::default() {
        parts.push(raw.qdisc.name().to_string());
    }
    if raw.tcp != TcpCongestion::default() {
        parts.push(raw.tcp.name().to_string());
    }
    parts.join("/")
}

impl Condition {
    /// A condition from its label (`100mbit/0.15ms`, `1mbit`, `1ms`), for
    /// a runs.csv written before the condition had columns of its own.
    /// `None`: `none`, or no rate and no latency in it.
    pub(crate) fn from_label(label: &str) -> Option<Self> {
        let mut bandwidth_bps = None;
        let mut latency_s = 0.0;
        for part in label.split('/') {
            if let Some(b) = parse_bandwidth(part).filter(|_| part.contains("bit")) {
                bandwidth_bps = Some(b);
            } else if let Some(l) = parse_latency(part) {
                latency_s = l;
            }
        }
        (bandwidth_bps.is_some() || latency_s > 0.0).then(|| Self {
            bandwidth_bps,
            latency_s,
            qdisc: RateQdisc::default(),
            tcp: TcpCongestion::default(),
            label: label.to_string(),
        })
    }
}

/// How a manifest's network conditions are made real.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ShapingMode {
    /// `netns` where a run has a condition (the MPI backend; needs root),
    /// the virtual clock for the simulator.
    #[default]
    Auto,
    /// One network namespace per rank with `tc` on its veth.
    Netns,
    /// A cluster: netem on the configured interface of every node.
    Hosts,
    /// Conditions are not applied (recorded as such).
    None,
}

/// `100mbit`, `1.5gbit`, `800kbit`, `1000000` (bits per second).
pub(crate) fn parse_bandwidth(s: &str) -> Option<f64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suffix, m)| s.strip_suffix(suffix).map(|n| (n.trim().to_string(), *m)))
        .unwrap_or((s.clone(), 1.0));
    num.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(|v| v * mult)
}

/// `0.15ms`, `1ms`, `20us`, `0.5s` (seconds).
pub(crate) fn parse_latency(s: &str) -> Option<f64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = [("ms", 1e-3), ("us", 1e-6), ("s", 1.0)]
        .iter()
        .find_map(|(suffix, m)| s.strip_suffix(suffix).map(|n| (n.trim().to_string(), *m)))?;
    num.parse::<f64>()
        .ok()
        .filter(|v| *v >= 0.0 && v.is_finite())
        .map(|v| v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(yaml: &str) -> Result<Option<Condition>, (String, String)> {
        Condition::from_yaml(&yaml_serde::from_str(yaml).unwrap(), None)
    }

    /// A bandwidth stated for the paper's model scales by our model's size:
    /// LeNet (61,706 parameters) gets 61706 / 269722 of ResNet20's rate,
    /// so its messages take as long on the wire.
    #[test]
    fn a_bandwidth_for_the_papers_model_scales_to_ours() {
        let yaml = "{bandwidth: 100mbit, latency: 0.15ms, paper_model: resnet20}";
        let lenet = repro_runlog::model_parameters("lenet", "fashion-mnist");
        let c = Condition::from_yaml(&yaml_serde::from_str(yaml).unwrap(), lenet)
            .unwrap()
            .unwrap();
        let want = 1e8 * 61_706.0 / 269_722.0;
        assert!((c.bandwidth_bps.unwrap() - want).abs() < 1e-6, "{c:?}");
        assert_eq!(c.label, "100mbit@resnet20/0.15ms");
        let (key, _) = cond(yaml).unwrap_err();
        assert_eq!(key, "paper_model", "no size of ours to scale by");
        let (key, m) = cond("{latency: 1ms, paper_model: resnet20}").unwrap_err();
        assert!(key == "paper_model" && m.contains("bandwidth"), "{m}");
        let (_, m) = Condition::from_yaml(
            &yaml_serde::from_str("{bandwidth: 1mbit, paper_model: resnet21}").unwrap(),
            lenet,
        )
        .unwrap_err();
        assert!(m.contains("no parameter count for `resnet21`"), "{m}");
    }

    #[test]
    fn conditions_parse_with_keys_named_in_errors() {
        let c = cond("{bandwidth: 100mbit, latency: 1ms}").unwrap().unwrap();
        assert_eq!(c.bandwidth_bps, Some(1e8));
        assert!((c.latency_s - 1e-3).abs() < 1e-15);
        assert_eq!(c.qdisc, RateQdisc::HtbAck);
        assert_eq!(c.label, "100mbit/1ms");
        assert_eq!(cond("none").unwrap(), None);
        assert_eq!(cond("{}").unwrap(), None);
        let htb = cond("{bandwidth: 5mbit, qdisc: htb}").unwrap().unwrap();
        assert_eq!((htb.qdisc, htb.latency_s), (RateQdisc::Htb, 0.0));
        // a label names every field that differs from the default
        assert_eq!(htb.label, "5mbit/htb");
        let bbr = cond("{bandwidth: 5mbit, tcp: bbr, qdisc: htb-ack}")
            .unwrap()
            .unwrap();
        assert_eq!(bbr.label, "5mbit/bbr");
        assert_eq!(cond("{bandwidth: fast}").unwrap_err().0, "bandwidth");
        assert_eq!(cond("{latency: 3}").unwrap_err().0, "latency");
        let (key, msg) = cond("{bandwith: 1mbit}").unwrap_err();
        assert!(msg.contains("bandwith"), "{key}: {msg}");
        assert!(cond("fast").is_err());
        assert_eq!(
            cond("{qdisc: cbq, bandwidth: 1mbit}").unwrap_err().0,
            "qdisc"
        );
    }

    #[test]
    fn units() {
        assert_eq!(parse_bandwidth("100mbit"), Some(1e8));
        assert_eq!(parse_bandwidth("1.5Gbit"), Some(1.5e9));
        assert_eq!(parse_bandwidth("fast"), None);
        assert_eq!(parse_latency("0.15ms"), Some(0.15e-3));
        assert!((parse_latency("20us").unwrap() - 20e-6).abs() < 1e-18);
        assert_eq!(parse_latency("1"), None);
    }
}
