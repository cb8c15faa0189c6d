//! Capacity vs public vLLM start-up logs (data/startup-logs.json). Tolerances and the errors
//! measured are documented in docs/capacity.md ("Accuracy against public logs").

use serde::Deserialize;
use servesim_core::capacity::compute;
use servesim_core::deploy::{parallelism_from, Deployment, RawEngineSettings};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::find_gpu;
use servesim_core::model::catalog;

#[derive(Deserialize)]
struct Log {
    id: String,
    model: String,
    gpu: String,
    tp: i64,
    dp: i64,
    ep: i64,
    weight_precision: String,
    kv_cache_dtype: String,
    gpu_memory_utilization: f64,
    block_size: i64,
    max_model_len: Option<i64>,
    max_num_batched_tokens: Option<i64>,
    max_num_seqs: Option<i64>,
    logged_available_gib: Option<f64>,
    logged_kv_tokens: Option<u64>,
    logged_fits: bool,
    #[serde(default)]
    logged_weights_gib: Option<f64>,
    #[serde(default)]
    note: String,
    source: String,
}

#[derive(Deserialize)]
struct File {
    logs: Vec<Log>,
}

fn logs() -> Vec<Log> {
    let f: File = serde_json::from_str(include_str!("../data/startup-logs.json")).unwrap();
    f.logs
}

fn deployment(l: &Log) -> Deployment {
    let raw = RawEngineSettings {
        gpu_memory_utilization: Some(l.gpu_memory_utilization),
        block_size: Some(l.block_size),
        max_model_len: l.max_model_len,
        max_num_batched_tokens: l.max_num_batched_tokens,
        max_num_seqs: l.max_num_seqs,
        ..Default::default()
    };
    Deployment::new(
        catalog::load(&l.model).unwrap(),
        find_gpu(&l.gpu).unwrap(),
        parallelism_from(Some(l.tp), Some(l.dp), Some(l.ep)).unwrap(),
        None,
        WeightPrecision::parse(&l.weight_precision).unwrap(),
        KvCacheDtype::parse(&l.kv_cache_dtype).unwrap(),
        &raw,
    )
    .unwrap()
}

/// Same-version logs (llm-d, vLLM 0.11 on H100): available KV memory within 0.75 GiB.
const TOL_SAME_VERSION_GIB: f64 = 0.75;
/// Older vLLM (0.9.x) with a KV connector: within 2 GiB.
const TOL_OTHER_GIB: f64 = 2.0;

#[test]
fn fits_verdict_matches_every_public_log() {
    for l in logs() {
        let r = compute(&deployment(&l), None).unwrap();
        assert_eq!(
            r.fits, l.logged_fits,
            "{} ({}): {}",
            l.id, l.source, r.reason
        );
    }
}

#[test]
fn available_kv_memory_matches_public_logs_within_tolerance() {
    let mut n = 0;
    for l in logs() {
        let Some(logged) = l.logged_available_gib else {
            continue;
        };
        let r = compute(&deployment(&l), None).unwrap();
        let err = r.breakdown.kv_available.gib - logged;
        let tol = if l.source.contains("llm-d") {
            TOL_SAME_VERSION_GIB
        } else {
            TOL_OTHER_GIB
        };
        println!(
            "{}: ours {:.2} GiB, logged {:.2} GiB, error {:+.2} GiB",
            l.id, r.breakdown.kv_available.gib, logged, err
        );
        assert!(
            err.abs() <= tol,
            "{}: ours {:.2} vs logged {logged:.2} GiB",
            l.id,
            r.breakdown.kv_available.gib
        );
        n += 1;
    }
    assert!(n >= 7);
}

/// Weights as vLLM's "Model loading took X GiB" line reports them, where the log's figures add
/// up (the gpt-oss-120b log's do not: its loading figure includes transient memory, its note
/// says so). The A100 log runs gpt-oss's MXFP4 experts through Marlin, whose padding
/// (docs/capacity.md "MXFP4 expert padding") is 0.85 of the 0.90 GiB the checkpoint alone would miss by;
/// the H100 logs (Triton kernels, no padding at TP 1) keep a 0.65 GiB gap (open item).
#[test]
fn weights_match_logged_model_loading() {
    let mut n = 0;
    for l in logs() {
        let Some(logged) = l.logged_weights_gib else {
            continue;
        };
        if l.note.contains("do not add up") {
            continue;
        }
        let r = compute(&deployment(&l), None).unwrap();
        let ours = r.breakdown.weights.gib;
        let pad = r.breakdown.kernel_padding.map_or(0.0, |m| m.gib);
        println!(
            "{}: weights ours {ours:.2} GiB (MXFP4 padding {pad:.2}), logged {logged:.2} GiB, error {:+.2} GiB",
            l.id,
            ours - logged
        );
        assert!((ours - logged).abs() <= TOL_SAME_VERSION_GIB, "{}", l.id);
        if l.id == "myoceane-gpt-oss-20b-a100" {
            assert!((ours - logged).abs() <= 0.1, "Marlin-padded weights");
            assert!(
                (ours - pad - logged).abs() > 0.8,
                "the padding is what closes the gap"
            );
        }
        n += 1;
    }
    assert!(n >= 5, "{n}");
}

#[test]
fn logged_token_counts_follow_from_logged_memory_and_our_block_bytes() {
    // Given vLLM's own available memory, our block size in bytes reproduces its token count
    // (uniform models: tokens = floor(available / block_bytes) * block_size).
    for l in logs() {
        let (Some(tokens), Some(avail)) = (l.logged_kv_tokens, l.logged_available_gib) else {
            continue;
        };
        let d = deployment(&l);
        let r = compute(&d, None).unwrap();
        let ours = (avail * (1u64 << 30) as f64) as u64 / r.block_bytes * r.block_size as u64;
        let rel = (ours as f64 - tokens as f64) / tokens as f64;
        println!(
            "{}: tokens from logged memory {ours}, logged {tokens} ({:+.2}%)",
            l.id,
            rel * 100.0
        );
        assert!(rel.abs() < 0.02, "{}: {ours} vs {tokens}", l.id);
    }
}

#[test]
fn failing_log_gets_vllm_error_text_and_a_fix() {
    let l = logs()
        .into_iter()
        .find(|l| l.id == "llmd-qwen3-32b-tp1-32k")
        .unwrap();
    let r = compute(&deployment(&l), None).unwrap();
    assert!(!r.fits);
    let msg = r.vllm_error.unwrap();
    assert!(msg.starts_with("To serve at least one request with the models's max seq len (32000)"));
    assert!(msg.contains("estimated maximum model length is"));
    assert!(r.deficit.bytes > 0);
    assert!(r.fixes.iter().any(|f| f.setting == "tp" && f.value == "2"));
    assert!(r.fixes.iter().any(|f| f.setting == "max_model_len"));
}
