//! What a deployment costs: $ per GPU-hour per GPU type (editable; documented defaults with
//! their sources) and $ per million tokens at a throughput. docs/search.md "Cost".

use serde::Serialize;

/// A default price and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DefaultPrice {
    /// Catalog GPU id (`gpu::catalog`).
    pub gpu: &'static str,
    /// $ per GPU-hour, on demand.
    pub usd_per_gpu_hour: f64,
    pub source: &'static str,
}

/// On-demand list prices of one GPU (not a whole node). Public rate cards, 2026; prices move,
/// so every search states the price it used and takes the user's own (`gpu_hour_usd`).
pub const DEFAULT_PRICES: [DefaultPrice; 4] = [
    DefaultPrice {
        gpu: "H100-SXM",
        usd_per_gpu_hour: 2.69,
        source: "RunPod on-demand H100 SXM, as listed in deploybase.ai \"B200 vs H200 vs H100\" (2026)",
    },
    DefaultPrice {
        gpu: "H200",
        usd_per_gpu_hour: 3.59,
        source: "RunPod on-demand H200 SXM, as listed in deploybase.ai \"B200 vs H200 vs H100\" (2026)",
    },
    DefaultPrice {
        gpu: "B200",
        usd_per_gpu_hour: 5.98,
        source: "RunPod on-demand B200, as listed in deploybase.ai \"B200 vs H200 vs H100\" (2026)",
    },
    DefaultPrice {
        gpu: "GB200",
        usd_per_gpu_hour: 4.54,
        source: "Spheron on-demand GB200 Superchip $9.08/h (1 Grace CPU + 2 B200 GPUs) as of 17 March 2026 (spheron.network, \"NVIDIA H200 vs B200 vs GB200\"), per GPU",
    },
];

/// The default price of a catalog GPU id, if there is one.
pub fn default_price(gpu_id: &str) -> Option<DefaultPrice> {
    DEFAULT_PRICES
        .iter()
        .find(|p| p.gpu.eq_ignore_ascii_case(gpu_id))
        .copied()
}

/// $ per million tokens when `num_gpus` GPUs at `usd_per_gpu_hour` each produce
/// `tokens_per_s` tokens per second: `num_gpus x price / (tokens_per_s x 3600) x 1e6`. The whole
/// hour's cost is charged to the token kind asked for (output or input), as price sheets quote
/// them. `None` when nothing is produced.
pub fn usd_per_million_tokens(
    num_gpus: u32,
    usd_per_gpu_hour: f64,
    tokens_per_s: f64,
) -> Option<f64> {
    if !tokens_per_s.is_finite() || tokens_per_s <= 0.0 {
        return None;
    }
    Some(num_gpus as f64 * usd_per_gpu_hour / (tokens_per_s * 3600.0) * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_follows_the_formula() {
        // 8 GPUs at $3.59/h making 10,000 tok/s: 28.72 $/h over 36e6 tokens/h
        let c = usd_per_million_tokens(8, 3.59, 10_000.0).unwrap();
        assert!((c - 8.0 * 3.59 / 36.0).abs() < 1e-12, "{c}");
        assert_eq!(usd_per_million_tokens(8, 3.59, 0.0), None);
        assert_eq!(usd_per_million_tokens(8, 3.59, f64::NAN), None);
    }

    #[test]
    fn defaults_name_catalog_gpus() {
        for p in DEFAULT_PRICES {
            assert!(crate::gpu::find_gpu(p.gpu).is_ok(), "{}", p.gpu);
            assert!(p.usd_per_gpu_hour > 0.0 && !p.source.is_empty());
        }
        assert_eq!(default_price("h200").unwrap().usd_per_gpu_hour, 3.59);
        assert!(default_price("A100-80GB").is_none());
    }
}
