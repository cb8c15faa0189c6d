//! Kernel-family fields a calibration entry's rows cannot identify ([`borrow_unidentified`]):
//! an entry fitted on rows of models without MoE layers (or without latent attention) never
//! reads the routed-expert (or latent-attention) fields, so its fit leaves them at the
//! literature table's values, which for the kernel chains is zero. Such a field is taken from
//! the nearest entry whose fit identified it (docs/accuracy.md, "Kernel-family fields an entry's
//! rows never read are borrowed"). No row the entry was fitted on reads the field, so its
//! in-sample results are the same with the borrowed value; what changes is every other model on
//! that entry's GPUs and release line: the page's scenarios and the held-out folds' predictions.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The fields read only by models with a kernel family (routed experts, latent attention):
/// [`FieldReach`] says which rows read them.
pub const KERNEL_FAMILY_FIELDS: &[&str] = &[
    "grouped_gemm_vs_dense",
    "hbm_expert_weights",
    "moe_layer_floor_s",
    "mla_layer_floor_s",
    "hbm_state",
];

/// The [`KERNEL_FAMILY_FIELDS`] that at least one of `lines` reads (`reach`: each simulated
/// row's [`FieldReach`], `None` for a row every field reaches; rows absent from `reach` are not
/// simulated and read nothing).
pub fn kernel_fields_read(
    lines: &[usize],
    reach: &BTreeMap<usize, Option<FieldReach>>,
) -> BTreeSet<&'static str> {
    KERNEL_FAMILY_FIELDS
        .iter()
        .copied()
        .filter(|f| {
            lines
                .iter()
                .any(|l| reach.get(l).is_some_and(|r| field_reaches(r.as_ref(), f)))
        })
        .collect()
}

/// What the rows of one fitted entry say about the [`KERNEL_FAMILY_FIELDS`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryReads {
    /// The fields at least one of its rows reads ([`kernel_fields_read`]): never borrowed.
    pub read: BTreeSet<&'static str>,
    /// The fields its descent tried (`KeyFitJob::params`): with `read`, what it can lend (an
    /// entry with fewer than 3 models tries none of these, and its literature values identify
    /// nothing).
    pub fitted: BTreeSet<&'static str>,
}

impl EntryReads {
    /// Whether the entry's fit identified `field`: its rows read it and its descent tried it.
    fn identifies(&self, field: &str) -> bool {
        self.read.contains(field) && self.fitted.contains(field)
    }
}

/// The release line of an entry key (`hopper@vllm-0.11` -> its era; a plain generation: none).
fn era_of(key: &str) -> Option<usize> {
    let era = key.split_once('@')?.1;
    crate::perf::EngineEra::ALL
        .iter()
        .position(|e| e.key() == era)
}

/// How far entry `to` is from `from`, for choosing a donor: release lines apart first (the chains
/// are kernels and launches of one vLLM release), then whether the GPU generation differs.
fn distance(from: &str, to: &str) -> (usize, bool) {
    let eras = match (era_of(from), era_of(to)) {
        (Some(a), Some(b)) => a.abs_diff(b),
        _ => 0,
    };
    (eras, generation_of(from) != generation_of(to))
}

/// The value `field` takes in entry `key` of `table`: the entry's fitted value, else the
/// literature value of its generation.
fn effective(key: &str, fields: &BTreeMap<String, f64>, field: &str) -> Option<f64> {
    let g: crate::gpu::Generation =
        serde_json::from_value(serde_json::json!(generation_of(key))).ok()?;
    let eff = crate::perf::Efficiencies::default_for(g)
        .with_fitted(fields)
        .ok()?;
    serde_json::to_value(eff).ok()?.get(field)?.as_f64()
}

/// `table` with every [`KERNEL_FAMILY_FIELDS`] field that no row of an entry reads taken from
/// the nearest entries whose fit identified it ([`EntryReads::identifies`]; [`distance`]: fewest
/// release lines apart, then the same GPU generation; several at that distance: the median of
/// their values, the mean of the middle two for an even count). `reads`: for each fitted entry
/// (harness and release-line parts of a generation job are not in it and are never filled nor
/// donors), what its rows read and its descent tried. A field no entry identifies stays as
/// fitted. What was borrowed is recorded in the result's [`FittedEfficiencies::borrowed`]
/// (entry -> field -> the donors, joined by ", ").
pub fn borrow_unidentified(
    table: &FittedEfficiencies,
    reads: &BTreeMap<String, EntryReads>,
) -> FittedEfficiencies {
    let mut out = table.clone();
    for (key, own) in reads {
        for &field in KERNEL_FAMILY_FIELDS {
            if own.read.contains(field) {
                continue;
            }
            let donors: Vec<(&String, (usize, bool))> = reads
                .iter()
                .filter(|(k, r)| *k != key && r.identifies(field))
                .map(|(k, _)| (k, distance(key, k)))
                .collect();
            let Some(nearest) = donors.iter().map(|d| d.1).min() else {
                continue;
            };
            let names: Vec<&String> = donors
                .iter()
                .filter(|d| d.1 == nearest)
                .map(|d| d.0)
                .collect();
            let empty = BTreeMap::new();
            let mut values: Vec<f64> = names
                .iter()
                .filter_map(|k| effective(k, table.generations.get(*k).unwrap_or(&empty), field))
                .collect();
            if values.len() != names.len() || values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            let n = values.len();
            let v = if n % 2 == 1 {
                values[n / 2]
            } else {
                (values[n / 2 - 1] + values[n / 2]) / 2.0
            };
            out.generations
                .entry(key.clone())
                .or_default()
                .insert(field.to_string(), v);
            out.borrowed.entry(key.clone()).or_default().insert(
                field.to_string(),
                names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries whose descents tried every kernel-family field, with the fields their rows read.
    fn reads(pairs: &[(&str, &[&'static str])]) -> BTreeMap<String, EntryReads> {
        pairs
            .iter()
            .map(|(k, f)| {
                let r = EntryReads {
                    read: f.iter().copied().collect(),
                    fitted: KERNEL_FAMILY_FIELDS.iter().copied().collect(),
                };
                (k.to_string(), r)
            })
            .collect()
    }

    fn table(pairs: &[(&str, &[(&str, f64)])]) -> FittedEfficiencies {
        FittedEfficiencies {
            generations: pairs
                .iter()
                .map(|(k, f)| {
                    (
                        k.to_string(),
                        f.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                    )
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn an_unread_kernel_field_comes_from_the_nearest_release_line_that_reads_it() {
        let moe: &[&str] = &[
            "grouped_gemm_vs_dense",
            "hbm_expert_weights",
            "moe_layer_floor_s",
        ];
        let all: &[&str] = KERNEL_FAMILY_FIELDS;
        let t = table(&[
            ("cdna3@vllm-0.7", &[("gemm_bf16", 0.2)]),
            ("hopper@vllm-0.11", &[("mla_layer_floor_s", 100e-6)]),
            ("hopper@vllm-0.15", &[("mla_layer_floor_s", 130e-6)]),
            ("ampere@vllm-0.11", &[("moe_layer_floor_s", 170e-6)]),
            ("blackwell@vllm-0.15", &[("gemm_bf16", 0.45)]),
        ]);
        let r = reads(&[
            ("cdna3@vllm-0.7", &[]),
            ("hopper@vllm-0.11", all),
            ("hopper@vllm-0.15", all),
            ("ampere@vllm-0.11", moe),
            ("blackwell@vllm-0.15", moe),
        ]);
        let out = borrow_unidentified(&t, &r);
        let get = |k: &str, f: &str| out.generations[k].get(f).copied();
        // V0 with no MoE or MLA rows: vLLM 0.11's entries are one release line away; two of
        // them read the MoE chain (median of 2 = mean), one the latent chain.
        assert_eq!(get("cdna3@vllm-0.7", "mla_layer_floor_s"), Some(100e-6));
        assert_eq!(
            get("cdna3@vllm-0.7", "moe_layer_floor_s"),
            Some((170e-6 + 0.0) / 2.0)
        );
        assert_eq!(
            out.borrowed["cdna3@vllm-0.7"]["moe_layer_floor_s"],
            "ampere@vllm-0.11, hopper@vllm-0.11"
        );
        // The same release line first, whatever the generation.
        assert_eq!(get("ampere@vllm-0.11", "mla_layer_floor_s"), Some(100e-6));
        assert_eq!(
            get("blackwell@vllm-0.15", "mla_layer_floor_s"),
            Some(130e-6)
        );
        // What an entry's rows read, and its other fields, stay as fitted.
        assert_eq!(get("ampere@vllm-0.11", "moe_layer_floor_s"), Some(170e-6));
        assert_eq!(get("blackwell@vllm-0.15", "gemm_bf16"), Some(0.45));
        assert_eq!(get("blackwell@vllm-0.15", "moe_layer_floor_s"), None);
        assert!(!out.borrowed.contains_key("hopper@vllm-0.15"));
    }

    #[test]
    fn an_entry_that_did_not_fit_a_field_lends_nothing() {
        // Blackwell's rows read the MoE fields but its few models fit only broad factors:
        // its literature values are no measurement to lend.
        let t = table(&[("ada@vllm-0.15", &[]), ("blackwell@vllm-0.15", &[])]);
        let mut r = reads(&[("ada@vllm-0.15", &[]), ("blackwell@vllm-0.15", &[])]);
        let bw = r.get_mut("blackwell@vllm-0.15").unwrap();
        bw.read = ["moe_layer_floor_s"].into_iter().collect();
        bw.fitted = ["gemm_bf16"].into_iter().collect();
        let out = borrow_unidentified(&t, &r);
        assert!(out.borrowed.is_empty());
        assert_eq!(out.generations, t.generations);
    }

    #[test]
    fn a_field_no_entry_reads_stays_as_fitted() {
        let t = table(&[("ada@vllm-0.11", &[("gemm_bf16", 0.85)])]);
        let r = reads(&[("ada@vllm-0.11", &[]), ("ampere@vllm-0.11", &[])]);
        let out = borrow_unidentified(&t, &r);
        assert_eq!(out.generations, t.generations);
        assert!(out.borrowed.is_empty());
    }
}
