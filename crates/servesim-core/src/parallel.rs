//! How one replica is spread over GPUs.

use serde::{Deserialize, Serialize};

/// Parallelism of one engine replica, by vLLM's meaning:
/// `tp` = `--tensor-parallel-size`, `dp` = `--data-parallel-size` (data-parallel attention: each DP
/// rank holds its own KV cache and runs its own batch), `ep` = expert-parallel group size (MoE
/// experts are sharded over `ep` GPUs; with vLLM's `--enable-expert-parallel`, `ep = tp * dp`).
/// GPUs per replica = `tp * dp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Parallelism {
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism {
            tp: 1,
            dp: 1,
            ep: 1,
        }
    }
}

impl Parallelism {
    /// GPUs in one replica.
    pub fn gpus(&self) -> u32 {
        self.tp * self.dp
    }
}
