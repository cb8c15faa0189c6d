//! FLOP primitives of the step-time (roofline) model.

use super::*;

impl ModelConfig {
    /// Matmul FLOPs per token, whole model.
    pub fn linear_flops_per_token(&self) -> LinearFlops {
        todo!()
    }

    /// Attention score+value FLOPs for `new` query tokens after `past` cached tokens, all layers.
    pub fn attention_core_flops(&self, past: u64, new: u64) -> f64 {
        let _ = (past, new);
        todo!()
    }
}
