//! GPU catalog: memory, bandwidth, dense tensor-core peaks and scale-up links.
//!
//! The catalog is `data/gpus.json` (project-owned schema, provenance in `data/gpus.PROVENANCE.md`),
//! embedded at compile time. Every figure keeps its source string and the conflicts recorded
//! between sources. Users may also describe a custom GPU ([`RawGpu`] -> [`GpuSpec`]).
//! Conventions and every assumed figure are in `docs/gpus.md`.

use crate::dtype::ComputeClass;
use crate::units::{Bytes, MIB};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

/// GPU vendor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
    Google,
    Other,
}

/// Architecture generation (decides which number formats have tensor-core support).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// NVIDIA sm_80 (A100).
    Ampere,
    /// NVIDIA sm_89 (L40S).
    Ada,
    /// NVIDIA sm_90 (H100, H200, H20).
    Hopper,
    /// NVIDIA sm_100 (B200, GB200).
    Blackwell,
    /// NVIDIA sm_103 (B300, GB300).
    BlackwellUltra,
    /// NVIDIA sm_120 (RTX PRO 6000 Blackwell).
    BlackwellRtx,
    /// AMD gfx942 (MI300X, MI325X).
    Cdna3,
    /// AMD gfx950 (MI355X).
    Cdna4,
    TpuV5e,
    TpuV6e,
    /// A user-described GPU.
    Custom,
}

impl Generation {
    /// True for the NVIDIA Blackwell family (NVFP4 tensor cores).
    pub fn is_blackwell(self) -> bool {
        matches!(
            self,
            Generation::Blackwell | Generation::BlackwellUltra | Generation::BlackwellRtx
        )
    }
    /// True for Google TPUs (vLLM's TPU worker sizes memory differently from the CUDA/ROCm worker).
    pub fn is_tpu(self) -> bool {
        matches!(self, Generation::TpuV5e | Generation::TpuV6e)
    }
}

/// How `memory_visible_mib` was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryBasis {
    /// A source records the figure (nvidia-smi / torch / a vLLM log).
    Recorded,
    /// ServeSim assumes it (the note says how).
    Assumed,
    /// The user gave it.
    User,
}

/// One catalog entry as stored in `data/gpus.json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogEntry {
    id: String,
    aliases: Vec<String>,
    name: String,
    vendor: Vendor,
    generation: Generation,
    arch: String,
    memory_marketed_gb: f64,
    memory_visible_mib: u64,
    memory_visible_basis: MemoryBasis,
    memory_visible_note: String,
    hbm_bandwidth_tb_s: f64,
    bf16_dense_tflops: f64,
    fp8_dense_tflops: Option<f64>,
    fp4_dense_tflops: Option<f64>,
    compute_note: String,
    scaleup_name: String,
    scaleup_unidir_gb_s: f64,
    scaleup_bidir_gb_s: f64,
    scaleup_domain: u32,
    tdp_w: Option<f64>,
    sources: BTreeMap<String, String>,
    conflicts: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    schema_version: u32,
    #[allow(dead_code)]
    provenance: String,
    gpus: Vec<CatalogEntry>,
}

/// A validated GPU description. All rates are positive and finite.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Short id (`H100-SXM`); what `find_gpu` matches first.
    pub id: String,
    pub aliases: Vec<String>,
    /// Full product name.
    pub name: String,
    pub vendor: Vendor,
    pub generation: Generation,
    pub arch: String,
    /// The vendor's capacity label in GB.
    pub memory_marketed_gb: f64,
    /// Total device memory vLLM sizes against (`torch.cuda.mem_get_info` total), in bytes.
    pub memory_visible: Bytes,
    pub memory_visible_basis: MemoryBasis,
    pub memory_visible_note: String,
    /// HBM (or GDDR) bandwidth, bytes per second.
    pub hbm_bandwidth_bytes_s: f64,
    /// Dense tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    pub fp8_flops: Option<f64>,
    pub fp4_flops: Option<f64>,
    pub compute_note: String,
    /// Scale-up interconnect (NVLink / xGMI / PCIe / ICI).
    pub scaleup_name: String,
    /// Unidirectional scale-up bandwidth per GPU (all links), bytes per second.
    pub scaleup_unidir_bytes_s: f64,
    /// GPUs in one scale-up domain (8 for HGX/MI300X nodes, 72 for NVL72).
    pub scaleup_domain: u32,
    pub tdp_w: Option<f64>,
    /// Source of each figure, by field name.
    pub sources: BTreeMap<String, String>,
    /// Disagreements between sources, as recorded.
    pub conflicts: Vec<String>,
}

impl GpuSpec {
    /// Dense peak FLOP/s for a compute class; `None` when the GPU has no tensor cores for it.
    pub fn flops(&self, class: ComputeClass) -> Option<f64> {
        match class {
            ComputeClass::Bf16 => Some(self.bf16_flops),
            ComputeClass::Fp8 => self.fp8_flops,
            ComputeClass::Fp4 => self.fp4_flops,
        }
    }
    /// True when the GPU has fp8 tensor cores.
    pub fn supports_fp8(&self) -> bool {
        self.fp8_flops.is_some()
    }
    /// True when the GPU has fp4 tensor cores.
    pub fn supports_fp4(&self) -> bool {
        self.fp4_flops.is_some()
    }
    /// Visible memory in GiB.
    pub fn memory_visible_gib(&self) -> f64 {
        self.memory_visible.gib()
    }
}

impl fmt::Display for GpuSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.id, self.name)
    }
}

/// Errors from the GPU catalog and custom GPU descriptions.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GpuError {
    #[error("unknown GPU `{name}`; known GPUs: {known}. Or describe a custom GPU (memory, bandwidth, TFLOPS)")]
    Unknown { name: String, known: String },
    #[error("GPU field `{field}` = {value} is invalid: {fix}")]
    InvalidField {
        field: &'static str,
        value: String,
        fix: String,
    },
    #[error("the embedded GPU catalog is malformed: {0}")]
    Catalog(String),
}

fn check_pos(field: &'static str, v: f64) -> Result<f64, GpuError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(GpuError::InvalidField {
            field,
            value: crate::bounds::fmt_num(v),
            fix: "must be a positive, finite number".into(),
        })
    }
}

/// A custom GPU figure inside its range (docs/scenario.md "Bounds").
fn check_in(field: &'static str, v: f64, b: crate::bounds::Bound) -> Result<f64, GpuError> {
    b.check(v).map_err(|fix| GpuError::InvalidField {
        field,
        value: crate::bounds::fmt_num(v),
        fix,
    })
}

fn check_opt(
    field: &'static str,
    v: Option<f64>,
    b: crate::bounds::Bound,
) -> Result<Option<f64>, GpuError> {
    v.map(|x| check_in(field, x, b)).transpose()
}

/// A custom GPU as a user writes it (all figures in the catalog's units).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub name: String,
    /// Memory vLLM sees, MiB (as `torch.cuda.mem_get_info` / nvidia-smi totals report).
    pub memory_visible_mib: f64,
    /// Memory bandwidth, TB/s (10^12 bytes/s).
    pub hbm_bandwidth_tb_s: f64,
    /// Dense BF16 tensor-core peak, TFLOPS.
    pub bf16_dense_tflops: f64,
    #[serde(default)]
    pub fp8_dense_tflops: Option<f64>,
    #[serde(default)]
    pub fp4_dense_tflops: Option<f64>,
    /// Scale-up link bandwidth per GPU, one direction, GB/s.
    pub scaleup_unidir_gb_s: f64,
    /// GPUs in one scale-up domain.
    pub scaleup_domain: u32,
    #[serde(default)]
    pub vendor: Option<Vendor>,
}

impl RawGpu {
    /// Validates a custom GPU: every figure positive and finite, name non-empty.
    pub fn validate(&self) -> Result<GpuSpec, GpuError> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err(GpuError::InvalidField {
                field: "name",
                value: "\"\"".into(),
                fix: "give the GPU a name".into(),
            });
        }
        use crate::bounds::{GPU_DOMAIN, GPU_HBM_TB_S, GPU_LINK_GB_S, GPU_MEMORY_MIB, GPU_TFLOPS};
        let mem = check_in(
            "memory_visible_mib",
            self.memory_visible_mib,
            GPU_MEMORY_MIB,
        )?;
        let bw = check_in("hbm_bandwidth_tb_s", self.hbm_bandwidth_tb_s, GPU_HBM_TB_S)?;
        let bf16 = check_in("bf16_dense_tflops", self.bf16_dense_tflops, GPU_TFLOPS)?;
        let fp8 = check_opt("fp8_dense_tflops", self.fp8_dense_tflops, GPU_TFLOPS)?;
        let fp4 = check_opt("fp4_dense_tflops", self.fp4_dense_tflops, GPU_TFLOPS)?;
        let link = check_in(
            "scaleup_unidir_gb_s",
            self.scaleup_unidir_gb_s,
            GPU_LINK_GB_S,
        )?;
        if self.scaleup_domain == 0 {
            return Err(GpuError::InvalidField {
                field: "scaleup_domain",
                value: "0".into(),
                fix: "must be at least 1 (GPUs in one NVLink/xGMI domain)".into(),
            });
        }
        check_in("scaleup_domain", self.scaleup_domain as f64, GPU_DOMAIN)?;
        let mut sources = BTreeMap::new();
        sources.insert("all".to_string(), "user input".to_string());
        Ok(GpuSpec {
            id: name.to_string(),
            aliases: Vec::new(),
            name: name.to_string(),
            vendor: self.vendor.unwrap_or(Vendor::Other),
            generation: Generation::Custom,
            arch: "custom".into(),
            memory_marketed_gb: mem / 1024.0,
            memory_visible: Bytes(libm::floor(mem * MIB as f64) as u64),
            memory_visible_basis: MemoryBasis::User,
            memory_visible_note: "given by the user".into(),
            hbm_bandwidth_bytes_s: bw * 1e12,
            bf16_flops: bf16 * 1e12,
            fp8_flops: fp8.map(|x| x * 1e12),
            fp4_flops: fp4.map(|x| x * 1e12),
            compute_note: "user input".into(),
            scaleup_name: "custom".into(),
            scaleup_unidir_bytes_s: link * 1e9,
            scaleup_domain: self.scaleup_domain,
            tdp_w: None,
            sources,
            conflicts: Vec::new(),
        })
    }
}

fn entry_to_spec(e: CatalogEntry) -> Result<GpuSpec, GpuError> {
    let raw = RawGpu {
        name: e.id.clone(),
        memory_visible_mib: e.memory_visible_mib as f64,
        hbm_bandwidth_tb_s: e.hbm_bandwidth_tb_s,
        bf16_dense_tflops: e.bf16_dense_tflops,
        fp8_dense_tflops: e.fp8_dense_tflops,
        fp4_dense_tflops: e.fp4_dense_tflops,
        scaleup_unidir_gb_s: e.scaleup_unidir_gb_s,
        scaleup_domain: e.scaleup_domain,
        vendor: Some(e.vendor),
    };
    let base = raw
        .validate()
        .map_err(|err| GpuError::Catalog(format!("{}: {err}", e.id)))?;
    check_pos("scaleup_bidir_gb_s", e.scaleup_bidir_gb_s)
        .map_err(|err| GpuError::Catalog(format!("{}: {err}", e.id)))?;
    Ok(GpuSpec {
        id: e.id,
        aliases: e.aliases,
        name: e.name,
        generation: e.generation,
        arch: e.arch,
        memory_marketed_gb: e.memory_marketed_gb,
        memory_visible: Bytes(e.memory_visible_mib * MIB),
        memory_visible_basis: e.memory_visible_basis,
        memory_visible_note: e.memory_visible_note,
        compute_note: e.compute_note,
        scaleup_name: e.scaleup_name,
        tdp_w: e.tdp_w,
        sources: e.sources,
        conflicts: e.conflicts,
        ..base
    })
}

const CATALOG_JSON: &str = include_str!("../data/gpus.json");

fn parse_catalog() -> Result<Vec<GpuSpec>, GpuError> {
    let file: CatalogFile =
        serde_json::from_str(CATALOG_JSON).map_err(|e| GpuError::Catalog(e.to_string()))?;
    if file.schema_version != 1 {
        return Err(GpuError::Catalog(format!(
            "schema_version {} (expected 1)",
            file.schema_version
        )));
    }
    file.gpus.into_iter().map(entry_to_spec).collect()
}

/// Every catalog GPU, in catalog order.
pub fn catalog() -> &'static [GpuSpec] {
    static CAT: OnceLock<Vec<GpuSpec>> = OnceLock::new();
    CAT.get_or_init(|| {
        // The catalog is compiled in and checked by tests; a malformed file is a build defect.
        parse_catalog().unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Catalog ids, in catalog order.
pub fn ids() -> Vec<&'static str> {
    catalog().iter().map(|g| g.id.as_str()).collect()
}

fn norm(s: &str) -> String {
    s.trim()
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' ' | '.'))
        .flat_map(|c| c.to_lowercase())
        .collect::<String>()
        .trim_start_matches("nvidia")
        .trim_start_matches("amd")
        .trim_start_matches("instinct")
        .trim_start_matches("google")
        .to_string()
}

/// Device names as the tools print them, to catalog ids: `nvidia-smi --query-gpu=name` (NVML's
/// device name, which the NVIDIA GPU operator also publishes as the `nvidia.com/gpu.product` node
/// label with spaces turned into `-`), `rocm-smi --showproductname` / `amd-smi` product names, and
/// the GKE accelerator labels (`cloud.google.com/gke-accelerator`, `gke-tpu-accelerator`).
/// Sources per entry in docs/gpus.md ("Names the tools print").
const REPORTED_NAMES: [(&str, &str); 25] = [
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),
    ("NVIDIA H100 PCIe", "H100-PCIE"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA H20", "H20"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA GB200", "GB200"),
    ("NVIDIA B300 SXM6 AC", "B300"),
    ("NVIDIA B300", "B300"),
    ("NVIDIA GB300", "GB300"),
    ("NVIDIA L40S", "L40S"),
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "RTX-PRO-6000",
    ),
    ("AMD Instinct MI300X", "MI300X"),
    ("AMD Instinct MI300X OAM", "MI300X"),
    ("AMD Instinct MI325X", "MI325X"),
    ("AMD Instinct MI325X OAM", "MI325X"),
    ("AMD Instinct MI355X", "MI355X"),
    ("AMD Instinct MI355X OAM", "MI355X"),
    ("nvidia-h100-80gb", "H100-SXM"),
    ("nvidia-h100-mega-80gb", "H100-SXM"),
    ("nvidia-h200-141gb", "H200"),
    ("nvidia-a100-80gb", "A100-80GB"),
    ("nvidia-b200", "B200"),
    ("tpu-v5-lite-podslice", "TPU-v5e"),
    ("tpu-v6e-slice", "TPU-v6e"),
];

/// The value of a Kubernetes node label or selector (`nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`,
/// `nvidia.com/gpu.product: NVIDIA-H200`), or the text itself when it is not a label.
fn label_value(name: &str) -> &str {
    let t = name.trim();
    let key_end = t.find(['=', ':']);
    match key_end {
        Some(i) if t[..i].contains('/') || t[..i].contains('.') => {
            t[i + 1..].trim().trim_matches(['"', '\''])
        }
        _ => t,
    }
}

/// Finds a catalog GPU by id, alias, the name `nvidia-smi` / `rocm-smi` print, or a Kubernetes
/// node label, ignoring case, `-`, `_`, spaces, `.` and a vendor prefix (`h100`, `H100-SXM`,
/// `NVIDIA H100 80GB HBM3`, `nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`, `AMD Instinct MI300X`).
pub fn find_gpu(name: &str) -> Result<GpuSpec, GpuError> {
    let value = label_value(name);
    // The GPU operator's `-SHARED` suffix marks time-sliced sharing of the same device.
    let value = value
        .strip_suffix("-SHARED")
        .or_else(|| value.strip_suffix("-shared"))
        .unwrap_or(value);
    let key = norm(value);
    if !key.is_empty() {
        for g in catalog() {
            if norm(&g.id) == key || g.aliases.iter().any(|a| norm(a) == key) {
                return Ok(g.clone());
            }
        }
        if let Some((_, id)) = REPORTED_NAMES.iter().find(|(n, _)| norm(n) == key) {
            if let Some(g) = catalog().iter().find(|g| g.id == *id) {
                return Ok(g.clone());
            }
        }
    }
    Err(GpuError::Unknown {
        name: crate::bounds::clip(name),
        known: ids().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::GIB;

    #[test]
    fn catalog_parses_and_has_required_gpus() {
        let ids = ids();
        for want in [
            "A100-80GB",
            "H100-SXM",
            "H200",
            "B200",
            "GB200",
            "B300",
            "GB300",
            "H20",
            "L40S",
            "RTX-4090",
            "MI300X",
            "MI325X",
            "MI355X",
        ] {
            assert!(ids.contains(&want), "missing {want}");
        }
    }

    #[test]
    fn lookup_is_case_and_punctuation_insensitive() {
        assert_eq!(find_gpu("h100").unwrap().id, "H100-SXM");
        assert_eq!(find_gpu("H100-SXM").unwrap().id, "H100-SXM");
        assert_eq!(find_gpu("NVIDIA H200").unwrap().id, "H200");
        assert_eq!(find_gpu("mi300x").unwrap().id, "MI300X");
        assert_eq!(find_gpu("gb200_nvl72").unwrap().id, "GB200");
    }

    #[test]
    fn names_as_the_tools_print_them_resolve() {
        for (name, id) in [
            ("NVIDIA H100 80GB HBM3", "H100-SXM"),
            ("NVIDIA H200", "H200"),
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("NVIDIA B200", "B200"),
            ("NVIDIA H100 PCIe", "H100-PCIE"),
            ("NVIDIA GB200", "GB200"),
            ("AMD Instinct MI300X", "MI300X"),
            ("AMD Instinct MI300X OAM", "MI300X"),
            ("NVIDIA GeForce RTX 4090", "RTX-4090"),
            ("nvidia.com/gpu.product=NVIDIA-GeForce-RTX-4090", "RTX-4090"),
            // The H20 and its 141 GB variant stay apart.
            ("NVIDIA H20", "H20"),
            ("NVIDIA H20-3e", "H20-3e"),
            ("nvidia.com/gpu.product=NVIDIA-H20-3e", "H20-3e"),
            ("AMD Instinct MI355X", "MI355X"),
            ("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", "H100-SXM"),
            ("nvidia.com/gpu.product: NVIDIA-H200", "H200"),
            (
                "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-SHARED",
                "H100-SXM",
            ),
            (
                "cloud.google.com/gke-accelerator=nvidia-h100-80gb",
                "H100-SXM",
            ),
            (
                "cloud.google.com/gke-tpu-accelerator: tpu-v6e-slice",
                "TPU-v6e",
            ),
        ] {
            assert_eq!(
                find_gpu(name).map(|g| g.id).ok().as_deref(),
                Some(id),
                "{name}"
            );
        }
        // A different product is not silently mapped to a near name.
        assert!(find_gpu("NVIDIA A100 80GB PCIe").is_err());
        assert!(find_gpu("nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB").is_err());
    }

    #[test]
    fn unknown_gpu_lists_known_ids() {
        match find_gpu("V100") {
            Err(GpuError::Unknown { known, .. }) => assert!(known.contains("H100-SXM")),
            other => panic!("{other:?}"),
        }
        assert!(find_gpu("").is_err());
    }

    #[test]
    fn recorded_visible_memory_matches_sources() {
        assert_eq!(
            find_gpu("GB200").unwrap().memory_visible,
            Bytes(189_471 * MIB)
        );
        assert_eq!(
            find_gpu("B300").unwrap().memory_visible,
            Bytes(275_040 * MIB)
        );
        // visible memory never exceeds the physical capacity label
        for g in catalog() {
            assert!(
                g.memory_visible.get() <= (g.memory_marketed_gb * 1.06 * GIB as f64) as u64,
                "{}",
                g.id
            );
            assert!(g.memory_visible.gib() > 10.0);
        }
    }

    #[test]
    fn format_support_follows_tensor_cores() {
        assert!(!find_gpu("A100").unwrap().supports_fp8());
        assert!(find_gpu("H100").unwrap().supports_fp8());
        assert!(!find_gpu("H100").unwrap().supports_fp4());
        assert!(find_gpu("B200").unwrap().supports_fp4());
        assert!(!find_gpu("MI300X").unwrap().supports_fp4());
        assert!(find_gpu("MI355X").unwrap().supports_fp4());
    }

    #[test]
    fn custom_gpu_rejects_zero_nan_and_negative() {
        let ok = RawGpu {
            name: "X1".into(),
            memory_visible_mib: 81_000.0,
            hbm_bandwidth_tb_s: 3.0,
            bf16_dense_tflops: 900.0,
            fp8_dense_tflops: Some(1800.0),
            fp4_dense_tflops: None,
            scaleup_unidir_gb_s: 400.0,
            scaleup_domain: 8,
            vendor: None,
        };
        let g = ok.validate().unwrap();
        assert_eq!(g.bf16_flops, 900e12);
        for (field, bad) in [
            (
                "memory_visible_mib",
                RawGpu {
                    memory_visible_mib: 0.0,
                    ..ok.clone()
                },
            ),
            (
                "hbm_bandwidth_tb_s",
                RawGpu {
                    hbm_bandwidth_tb_s: f64::NAN,
                    ..ok.clone()
                },
            ),
            (
                "bf16_dense_tflops",
                RawGpu {
                    bf16_dense_tflops: -1.0,
                    ..ok.clone()
                },
            ),
            (
                "fp8_dense_tflops",
                RawGpu {
                    fp8_dense_tflops: Some(0.0),
                    ..ok.clone()
                },
            ),
            (
                "scaleup_domain",
                RawGpu {
                    scaleup_domain: 0,
                    ..ok.clone()
                },
            ),
        ] {
            match bad.validate() {
                Err(GpuError::InvalidField { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn raw_gpu_rejects_unknown_fields() {
        let j = r#"{"name":"x","memory_visible_mib":1,"hbm_bandwidth_tb_s":1,"bf16_dense_tflops":1,"scaleup_unidir_gb_s":1,"scaleup_domain":1,"colour":"red"}"#;
        assert!(serde_json::from_str::<RawGpu>(j).is_err());
    }
}
