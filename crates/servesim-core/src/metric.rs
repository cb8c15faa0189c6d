//! The names of every per-level metric, shared by the simulator, the importers, the scorer, the CLI
//! and the page. `docs/metrics.md` defines each one by a formula over per-request timestamps.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A summary statistic of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
}

impl Stat {
    pub const ALL: [Stat; 4] = [Stat::Mean, Stat::P50, Stat::P90, Stat::P99];
    pub fn name(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
        }
    }
}

/// One metric of one sweep level. The `name()` is the key used in `servesim sweep --json`, in CSV
/// headers, in share links and in comparison reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MetricId {
    CompletedRequests,
    RequestsPerS,
    InputTokensPerS,
    OutputTokensPerS,
    OutputTokensPerSPerGpu,
    /// Mean over requests of output tokens / E2E latency.
    OutputTokensPerSPerUser,
    /// The recipe's E2E tok/s/user = OSL / (TTFT + OSL x ITL), from mean values.
    E2eTokensPerSPerUser,
    /// 1000 / TPOT(ms), from the mean TPOT.
    Interactivity,
    TtftMs(Stat),
    ItlMs(Stat),
    /// Per-request TPOT `(E2E - TTFT) / (output tokens - 1)`: its mean and percentiles over
    /// the measured requests with more than one output token.
    TpotMs(Stat),
    E2eS(Stat),
    QueueingMsMean,
    KvUtilizationMean,
    KvUtilizationPeak,
    PrefixCacheHitRate,
    Preemptions,
    MeanRunningBatch,
    RejectedRequests,
    /// CPU KV offload tier: prompt tokens loaded from the CPU tier / prompt tokens looked up.
    CpuHitRate,
}

impl MetricId {
    /// Every metric, in the order tables print them.
    pub fn all() -> Vec<MetricId> {
        let mut v = vec![
            MetricId::CompletedRequests,
            MetricId::RequestsPerS,
            MetricId::InputTokensPerS,
            MetricId::OutputTokensPerS,
            MetricId::OutputTokensPerSPerGpu,
            MetricId::OutputTokensPerSPerUser,
            MetricId::E2eTokensPerSPerUser,
            MetricId::Interactivity,
        ];
        v.extend(Stat::ALL.iter().map(|s| MetricId::TtftMs(*s)));
        v.extend(Stat::ALL.iter().map(|s| MetricId::ItlMs(*s)));
        v.extend(Stat::ALL.iter().map(|s| MetricId::TpotMs(*s)));
        v.extend(Stat::ALL.iter().map(|s| MetricId::E2eS(*s)));
        v.extend([
            MetricId::QueueingMsMean,
            MetricId::KvUtilizationMean,
            MetricId::KvUtilizationPeak,
            MetricId::PrefixCacheHitRate,
            MetricId::Preemptions,
            MetricId::MeanRunningBatch,
            MetricId::RejectedRequests,
            MetricId::CpuHitRate,
        ]);
        v
    }

    /// The flat key, e.g. `ttft_ms_p50`, `output_tokens_per_s`.
    pub fn name(self) -> String {
        match self {
            MetricId::CompletedRequests => "completed_requests".into(),
            MetricId::RequestsPerS => "requests_per_s".into(),
            MetricId::InputTokensPerS => "input_tokens_per_s".into(),
            MetricId::OutputTokensPerS => "output_tokens_per_s".into(),
            MetricId::OutputTokensPerSPerGpu => "output_tokens_per_s_per_gpu".into(),
            MetricId::OutputTokensPerSPerUser => "output_tokens_per_s_per_user".into(),
            MetricId::E2eTokensPerSPerUser => "e2e_tokens_per_s_per_user".into(),
            MetricId::Interactivity => "interactivity".into(),
            MetricId::TtftMs(s) => format!("ttft_ms_{}", s.name()),
            MetricId::ItlMs(s) => format!("itl_ms_{}", s.name()),
            MetricId::TpotMs(s) => format!("tpot_ms_{}", s.name()),
            MetricId::E2eS(s) => format!("e2e_s_{}", s.name()),
            MetricId::QueueingMsMean => "queueing_ms_mean".into(),
            MetricId::KvUtilizationMean => "kv_utilization_mean".into(),
            MetricId::KvUtilizationPeak => "kv_utilization_peak".into(),
            MetricId::PrefixCacheHitRate => "prefix_cache_hit_rate".into(),
            MetricId::Preemptions => "preemptions".into(),
            MetricId::MeanRunningBatch => "mean_running_batch".into(),
            MetricId::RejectedRequests => "rejected_requests".into(),
            MetricId::CpuHitRate => "cpu_hit_rate".into(),
        }
    }

    /// Parses a flat key produced by [`MetricId::name`].
    pub fn from_name(s: &str) -> Option<MetricId> {
        MetricId::all().into_iter().find(|m| m.name() == s)
    }

    /// A human label with its unit, for tables and chart axes.
    pub fn label(self) -> String {
        match self {
            MetricId::CompletedRequests => "completed requests".into(),
            MetricId::RequestsPerS => "requests/s".into(),
            MetricId::InputTokensPerS => "input tok/s".into(),
            MetricId::OutputTokensPerS => "output tok/s".into(),
            MetricId::OutputTokensPerSPerGpu => "output tok/s per GPU".into(),
            MetricId::OutputTokensPerSPerUser => "output tok/s per user".into(),
            MetricId::E2eTokensPerSPerUser => "E2E tok/s per user".into(),
            MetricId::Interactivity => "interactivity (1000/TPOT ms)".into(),
            MetricId::TtftMs(s) => format!("TTFT {} (ms)", s.name()),
            MetricId::ItlMs(s) => format!("ITL {} (ms)", s.name()),
            MetricId::TpotMs(s) => format!("TPOT {} (ms)", s.name()),
            MetricId::E2eS(s) => format!("E2E latency {} (s)", s.name()),
            MetricId::QueueingMsMean => "queueing mean (ms)".into(),
            MetricId::KvUtilizationMean => "KV utilisation mean".into(),
            MetricId::KvUtilizationPeak => "KV utilisation peak".into(),
            MetricId::PrefixCacheHitRate => "prefix-cache hit rate".into(),
            MetricId::Preemptions => "preemptions".into(),
            MetricId::MeanRunningBatch => "mean running batch".into(),
            MetricId::RejectedRequests => "rejected requests".into(),
            MetricId::CpuHitRate => "CPU-tier hit rate".into(),
        }
    }
}

impl fmt::Display for MetricId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        let all = MetricId::all();
        let mut names: Vec<String> = all.iter().map(|m| m.name()).collect();
        for m in &all {
            assert_eq!(MetricId::from_name(&m.name()), Some(*m));
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
