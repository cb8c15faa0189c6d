//! Parameter counting, weight bytes and per-GPU weight sharding.

use super::*;
use crate::dtype::WeightPrecision;
use crate::parallel::Parallelism;
use crate::units::Bytes;

impl ModelConfig {
    /// Parameter counts by group; `total` and `active` exclude MTP layers (as published figures do).
    pub fn params(&self) -> ParamCounts {
        todo!()
    }

    /// Weight bytes per tensor group at `prec` (whole model, one replica, MTP excluded).
    pub fn weight_bytes(&self, prec: WeightPrecision) -> WeightBytes {
        let _ = prec;
        todo!()
    }

    /// Weight bytes one GPU holds under `par` (sharding rules in docs/models.md).
    pub fn weight_bytes_per_gpu(
        &self,
        prec: WeightPrecision,
        par: Parallelism,
    ) -> Result<Bytes, ModelError> {
        let _ = (prec, par);
        todo!()
    }

    /// Bytes of ONE routed expert in ONE layer at `prec` (incl. scales); `None` for dense models.
    pub fn expert_bytes(&self, prec: WeightPrecision) -> Option<Bytes> {
        let _ = prec;
        todo!()
    }
}
