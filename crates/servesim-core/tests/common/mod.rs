//! Helpers shared by the engine's integration tests (each test file includes this module).

use servesim_core::engine::LinearStepTime;

/// ~8B-on-one-GPU-like linear step costs: 6 ms per step, 40 us per token, 2 ns per KV token read.
pub fn linear_8b() -> LinearStepTime {
    LinearStepTime {
        per_step_ns: 6.0e6,
        per_token_ns: 40_000.0,
        per_ctx_token_ns: 2.0,
    }
}
