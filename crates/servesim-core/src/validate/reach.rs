//! Which rows a fitted field can move ([`FieldReach`]): the fit simulates a trial value of a
//! field only on the rows whose simulation reads that field, since every other row's result is
//! the same under any value (the simulation is deterministic). Conservative: a field is taken to
//! reach a row unless the step-time model or the scenario never reads it for that row's
//! deployment; `tests/validate_fit_reach.rs` checks each "never" on every calibration row by
//! simulating it at the field's lowest and highest fitted value.

use super::PointSetup;
use crate::scenario::Endpoint;

/// What decides, for one row, which fields its simulation reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldReach {
    /// The clients call the completions endpoint (`api_latency_completions_s`).
    completions: bool,
    /// The clients call the chat endpoint (`api_latency_chat_s`).
    chat: bool,
    /// The API server renders chat templates on its event loop (`api_render_chat_s`,
    /// `Scenario::renders_chat_on_event_loop`).
    render_chat: bool,
    /// The model has MoE layers, or a draft model runs beside it (`grouped_gemm_vs_dense`,
    /// `hbm_expert_weights`, `moe_layer_floor_s`: read through the routed experts' terms only).
    moe: bool,
    /// The model has latent-attention layers, or a draft model runs (`mla_layer_floor_s`: times
    /// the number of MLA layers).
    mla: bool,
    /// The model's layers keep a fixed per-sequence recurrent state (Gated DeltaNet), or a draft
    /// model runs (`hbm_state`: times the state's bytes, 0 without such layers).
    state: bool,
    /// An engine spans more than one GPU (`tp` or `dp` above 1), or a draft model runs
    /// (`allreduce_bus_eff`, `allreduce_latency_s`: the collectives' rings are empty on one GPU).
    collectives: bool,
    /// vLLM V0's paged prefix-prefill kernel (`prefill_attention_paged`,
    /// `EngineSettings::v0_paged_prefill`).
    paged_prefill: bool,
    /// A weight-only (dequantising) GEMM runs (`gemm_weight_only`,
    /// `perf::runs_weight_only_gemms`), or a draft model runs beside the target.
    weight_only: bool,
    /// vLLM's Triton unified attention kernel (`prefill_attention_triton`,
    /// `EngineSettings::triton_unified_prefill`).
    triton_prefill: bool,
    /// vLLM V0's unfused fp8 fallback (`fp8_unfused_launch_s`, `EngineSettings::v0_unfused_fp8`).
    unfused_fp8: bool,
}

impl FieldReach {
    /// The reach of a row's scenario; `None` (every field reaches) when the scenario has no
    /// single deployment (a disaggregated topology) or does not resolve.
    pub fn of(setup: &PointSetup) -> Option<FieldReach> {
        let sc = &setup.scenario;
        if sc.topology.is_some() {
            return None;
        }
        let dep = sc.deployment().ok()?;
        let endpoint = sc.endpoint.unwrap_or_default();
        let draft = dep.engine.speculative.is_some();
        let m = &dep.model;
        Some(FieldReach {
            completions: endpoint == Endpoint::Completions,
            chat: endpoint == Endpoint::Chat,
            render_chat: sc.renders_chat_on_event_loop(m).unwrap_or(true),
            moe: draft || m.num_moe_layers() > 0,
            mla: draft || m.num_latent_attention_layers() > 0,
            state: draft || m.num_linear_attention_layers() > 0,
            collectives: draft || dep.par.tp > 1 || dep.par.dp > 1,
            paged_prefill: dep.engine.v0_paged_prefill(&dep.gpu),
            triton_prefill: dep.engine.triton_unified_prefill(m, &dep.gpu),
            weight_only: draft || crate::perf::runs_weight_only_gemms(&dep),
            unfused_fp8: dep.engine.v0_unfused_fp8(&dep.gpu, &m.checkpoint),
        })
    }

    /// Whether the efficiency-table field `field` can change this row's simulation.
    pub fn reaches(&self, field: &str) -> bool {
        match field {
            "api_latency_completions_s" => self.completions,
            "api_latency_chat_s" => self.chat,
            "api_render_chat_s" => self.render_chat,
            "grouped_gemm_vs_dense" | "hbm_expert_weights" | "moe_layer_floor_s" => self.moe,
            "mla_layer_floor_s" => self.mla,
            "hbm_state" => self.state,
            "allreduce_bus_eff" | "allreduce_latency_s" => self.collectives,
            "prefill_attention_paged" => self.paged_prefill,
            "prefill_attention_triton" => self.triton_prefill,
            "gemm_weight_only" => self.weight_only,
            "fp8_unfused_launch_s" => self.unfused_fp8,
            _ => true,
        }
    }
}

/// Whether `field` can change the simulation of a row with reach `reach` (`None`: unknown, so
/// yes).
pub fn field_reaches(reach: Option<&FieldReach>, field: &str) -> bool {
    reach.is_none_or(|r| r.reaches(field))
}
