//! The one table of ServeSim's workload and sweep settings (the counterpart of
//! [`crate::vllm::args::registry`] for what is not a `vllm serve` argument): each setting's CLI
//! flag (`servesim sweep --concurrency`), the page's form field, the scenario JSON paths whose
//! errors belong to it, its value, its range ([`crate::bounds`]) and its help text. The CLI's
//! flags take their help from here and apply their values through [`apply`]; the page maps a
//! core error's JSON path to its field with [`form_key`]. Documented in docs/scenario.md ("CLI").
//!
//! To add a setting: add one [`Setting`] (and, if the CLI applies it on its own, a [`Target`]
//! arm in [`apply`]); the CLI flag's clap definition takes `help = settings::help("flag")`.

use crate::bounds::{self, Bound};
use crate::compare::LevelKind;
use crate::scenario::Scenario;

/// What a setting's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// One number.
    Number,
    /// Numbers, comma-separated on the command line.
    Numbers,
    /// A whole number 0 or more.
    Whole,
    /// Text with its own syntax (named in the help).
    Text,
}

/// One value of a setting, as the CLI read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SettingValue<'a> {
    Number(f64),
    Numbers(&'a [f64]),
    Whole(u64),
    Text(&'a str),
}

/// How the CLI applies a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Read together with the other request-content flags into `workload.requests` (the CLI's
    /// `--workload` / `--isl` / `--osl` / `--*-dist` / `--prefix-*` / `--trace` group).
    Content,
    /// Page only: no CLI flag.
    PageOnly,
    /// The sweep's levels of this kind, and the arrival at the first ([`Scenario::set_levels`]).
    Levels(LevelKind),
    /// `sweep.num_requests`; clears `sweep.duration_s` and `sweep.warmup_s`.
    NumRequests,
    /// `sweep.duration_s`; clears `sweep.num_requests` and the warm-up (back to 10 % of the
    /// duration unless `--warmup` is given too, which is applied after).
    Duration,
    /// `sweep.warmup_s`.
    Warmup,
    /// `workload.seed`.
    Seed,
    /// `sweep.sla`, parsed by [`crate::sweep::parse_sla`].
    Sla,
}

/// One workload or sweep setting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setting {
    /// The CLI's long flag without dashes (`request-rate`), if it has one.
    pub flag: Option<&'static str>,
    /// The page's form field key (`levels`), if the page has a field for it.
    pub form_key: Option<&'static str>,
    /// Scenario JSON paths whose errors belong to this setting (a path below one counts too).
    pub paths: &'static [&'static str],
    pub kind: ValueKind,
    /// The range the core checks ([`crate::bounds`]), where one applies.
    pub range: Option<Bound>,
    pub target: Target,
    pub help: &'static str,
}

impl Setting {
    /// The help text with the range appended (what `--help` prints).
    pub fn help_text(&self) -> String {
        match &self.range {
            Some(b) => format!(
                "{} [{} to {}{}{}]",
                self.help,
                bounds::fmt_num(b.min),
                bounds::fmt_num(b.max),
                if b.unit.is_empty() { "" } else { " " },
                b.unit
            ),
            None => self.help.to_string(),
        }
    }
}

const fn cli(
    flag: &'static str,
    form_key: Option<&'static str>,
    paths: &'static [&'static str],
    kind: ValueKind,
    range: Option<Bound>,
    target: Target,
    help: &'static str,
) -> Setting {
    Setting {
        flag: Some(flag),
        form_key,
        paths,
        kind,
        range,
        target,
        help,
    }
}

const fn page(
    form_key: &'static str,
    paths: &'static [&'static str],
    range: Option<Bound>,
    help: &'static str,
) -> Setting {
    Setting {
        flag: None,
        form_key: Some(form_key),
        paths,
        kind: ValueKind::Number,
        range,
        target: Target::PageOnly,
        help,
    }
}

use ValueKind::{Number, Numbers, Text, Whole};

/// The table, in the order the CLI applies it (content first, then the levels, the stop rule,
/// the warm-up after the duration, the seed and the SLA). A `const`: the CLI's [`settings`] and
/// the page's [`form_key`] each link only their own projection of it (the page binary carries
/// the paths and keys, not the help texts).
const ALL: &[Setting] = &[
    // --- request content (`workload.requests`) ------------------------------------------------
    cli("workload", Some("content"), &["workload.requests"], Text, None, Target::Content,
        "random | shared-prefix | agentic | trace. Giving any request flag (this, --isl, --osl, --isl-dist, --osl-dist, --prefix-*, --trace) rebuilds the request content from flags."),
    cli("isl", None, &["workload.requests.input"], Number, Some(bounds::TOKENS), Target::Content,
        "Input tokens per request (mean of --isl-dist; default 1024). With shared-prefix: the whole prompt including the shared prefix."),
    cli("osl", None, &["workload.requests.output"], Number, Some(bounds::TOKENS), Target::Content,
        "Output tokens per request (mean of --osl-dist; default 128)."),
    cli("isl-dist", None, &["workload.requests.input"], Text, None, Target::Content,
        "constant | uniform:LO-HI (ratios of --isl) | normal:STD[:MIN-MAX] | lognormal:SIGMA[:MIN-MAX] | exponential[:MIN-MAX]."),
    cli("osl-dist", None, &["workload.requests.output"], Text, None, Target::Content,
        "As --isl-dist, for output lengths."),
    cli("prefix-tokens", Some("prefix_tokens"), &["workload.requests.shared_prefix"], Number, Some(bounds::TOKENS), Target::Content,
        "Shared-prefix tokens per group (shared-prefix workload)."),
    cli("prefix-groups", Some("prefix_groups"), &["workload.requests.shared_prefix.groups"], Number, Some(bounds::SMALL_COUNT), Target::Content,
        "Number of distinct shared prefixes (default 1)."),
    cli("prefix-prompts", Some("prefix_prompts"), &["workload.requests.shared_prefix.prompts_per_group"], Number, Some(bounds::SMALL_COUNT), Target::Content,
        "Distinct prompts per prefix group, sent in a fixed shuffled cycle (inference-perf's shared_prefix pool: num_prompts_per_group); omit for a new prompt every request."),
    cli("prefix-reuse", None, &["workload.requests.shared_prefix.tokens"], Number, None, Target::Content,
        "Fraction of --isl that is shared prefix (prefix tokens = round(F * isl)); in (0, 1)."),
    cli("trace", Some("trace"), &["workload.requests.jsonl"], Text, None, Target::Content,
        "A Mooncake JSONL trace (with --workload trace, implied)."),
    page("trace_block_tokens", &["workload.requests.block_tokens"], Some(bounds::TOKENS),
        "Tokens per hash id of the trace (Mooncake: 512)."),
    // --- arrivals and levels (`workload.arrival`, `sweep`) ------------------------------------
    page("arrival_value", &["workload.arrival"], None,
        "The arrival's own level (concurrency, rate or burst size); each sweep level replaces it."),
    page("think_time_s", &["workload.arrival.think_time_s"], Some(bounds::THINK_TIME_S),
        "Closed loop: seconds a client waits between a response and its next request."),
    page("arrival_cv", &["workload.arrival.cv"], Some(bounds::GAMMA_CV),
        "Gamma arrivals: coefficient of variation of the gaps (1 = Poisson)."),
    cli("concurrency", Some("levels"), &["sweep.concurrency"], Numbers, Some(bounds::CONCURRENCY), Target::Levels(LevelKind::Concurrency),
        "Closed-loop concurrency levels, comma-separated (e.g. 1,2,4,8)."),
    cli("request-rate", Some("levels"), &["sweep.request_rates"], Numbers, Some(bounds::REQUEST_RATE), Target::Levels(LevelKind::RequestRate),
        "Open-loop request-rate levels (req/s), comma-separated: Poisson arrivals (trace: rescaled)."),
    cli("burst", Some("levels"), &["sweep.concurrency"], Numbers, Some(bounds::CONCURRENCY), Target::Levels(LevelKind::Burst),
        "Burst sizes (all requests at t = 0), comma-separated; each level runs until its burst finishes (unless --duration or --num-requests is given)."),
    // --- how long a level runs, seed, SLA -----------------------------------------------------
    cli("num-requests", Some("num_requests"), &["sweep.num_requests"], Number, Some(bounds::NUM_REQUESTS), Target::NumRequests,
        "Issue this many requests per level and run until all finish (instead of --duration)."),
    cli("duration", Some("duration_s"), &["sweep.duration_s"], Number, Some(bounds::DURATION_S), Target::Duration,
        "Simulated seconds per level."),
    cli("warmup", Some("warmup_s"), &["sweep.warmup_s"], Number, None, Target::Warmup,
        "Warm-up seconds excluded from the measurement window."),
    cli("seed", Some("seed"), &["workload.seed"], Whole, None, Target::Seed,
        "Workload random seed."),
    cli("sla", Some("sla"), &["sweep.sla"], Text, None, Target::Sla,
        "SLA gates, comma-separated: 'e2e_tokens_per_s_per_user>=50,ttft_ms_p50<5000'."),
];

static SETTINGS: &[Setting] = ALL;

/// A setting's JSON paths and its page field.
type FormPaths = (&'static [&'static str], Option<&'static str>);

/// (paths, form key) of every setting with a page field: [`ALL`] projected at compile time.
static FORM_PATHS: [FormPaths; ALL.len()] = {
    let mut out: [FormPaths; ALL.len()] = [(&[], None); ALL.len()];
    let mut i = 0;
    while i < ALL.len() {
        out[i] = (ALL[i].paths, ALL[i].form_key);
        i += 1;
    }
    out
};

/// Every workload and sweep setting, in the order the CLI applies them.
pub fn settings() -> &'static [Setting] {
    SETTINGS
}

/// The setting with this CLI flag (without dashes).
pub fn by_flag(flag: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.flag == Some(flag))
}

/// The help text of a CLI flag (with its range), for clap's `help = ...`; empty for a flag
/// the table does not have (a test checks every flag of `servesim sweep` is in it).
pub fn help(flag: &str) -> String {
    by_flag(flag).map(Setting::help_text).unwrap_or_default()
}

/// The page's form field for an error at JSON path `path`: the field of the setting whose path
/// is the longest prefix of `path` (at a `.` boundary), or `None`.
pub fn form_key(path: &str) -> Option<&'static str> {
    let under = |p: &str| {
        path == p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    FORM_PATHS
        .iter()
        .filter_map(|(paths, key)| {
            let key = (*key)?;
            let p = paths.iter().filter(|p| under(p)).max_by_key(|p| p.len())?;
            Some((p.len(), key))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, key)| key)
}

/// Applies one CLI setting's value to the scenario. `Content` settings are read as a group by
/// the CLI (and `PageOnly` ones have no flag): this does nothing for them. The error is the
/// message after the flag (`--sla ` + message).
pub fn apply(s: &mut Scenario, setting: &Setting, v: SettingValue<'_>) -> Result<(), String> {
    let num = || match v {
        SettingValue::Number(x) => x,
        SettingValue::Whole(n) => n as f64,
        _ => f64::NAN,
    };
    match setting.target {
        Target::Content | Target::PageOnly => {}
        Target::Levels(kind) => {
            if let SettingValue::Numbers(levels) = v {
                s.set_levels(kind, levels);
            }
        }
        Target::NumRequests => {
            s.sweep.num_requests = Some(num());
            s.sweep.duration_s = None;
            s.sweep.warmup_s = None;
        }
        Target::Duration => {
            s.sweep.duration_s = Some(num());
            s.sweep.num_requests = None;
            // the scenario's warm-up may not fit the new duration: back to 10% of it (a
            // `--warmup` given too is applied after this)
            s.sweep.warmup_s = None;
        }
        Target::Warmup => s.sweep.warmup_s = Some(num()),
        Target::Seed => {
            if let SettingValue::Whole(n) = v {
                s.workload.seed = n;
            }
        }
        Target::Sla => {
            if let SettingValue::Text(t) = v {
                s.sweep.sla = crate::sweep::parse_sla(t)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_form_keys_are_unique_where_they_must_be() {
        let mut flags: Vec<&str> = SETTINGS.iter().filter_map(|s| s.flag).collect();
        let n = flags.len();
        flags.sort();
        flags.dedup();
        assert_eq!(flags.len(), n, "a flag is listed twice");
        for s in SETTINGS {
            assert!(!s.help.is_empty() && !s.paths.is_empty(), "{s:?}");
            assert!(s.flag.is_some() || s.form_key.is_some(), "{s:?}");
            assert_eq!(s.flag.is_none(), s.target == Target::PageOnly, "{s:?}");
        }
    }

    #[test]
    fn errors_land_on_the_field_of_the_longest_matching_path() {
        assert_eq!(form_key("sweep.concurrency"), Some("levels"));
        assert_eq!(form_key("sweep.request_rates"), Some("levels"));
        assert_eq!(form_key("sweep.sla.metric"), Some("sla"));
        assert_eq!(form_key("workload.arrival.rate"), Some("arrival_value"));
        assert_eq!(form_key("workload.arrival.cv"), Some("arrival_cv"));
        assert_eq!(
            form_key("workload.requests.shared_prefix.groups"),
            Some("prefix_groups")
        );
        assert_eq!(
            form_key("workload.requests.shared_prefix.tokens"),
            Some("prefix_tokens")
        );
        assert_eq!(
            form_key("workload.requests.shared_prefix.prompts_per_group"),
            Some("prefix_prompts")
        );
        assert_eq!(form_key("workload.requests.name"), Some("content"));
        // A path is matched at a `.` boundary only, and unknown ones have no field.
        assert_eq!(form_key("workload.seeds"), None);
        assert_eq!(form_key("sweep.max_events"), None);
        assert_eq!(form_key("sweep"), None);
    }

    #[test]
    fn help_carries_the_range() {
        assert_eq!(
            help("duration"),
            "Simulated seconds per level. [0.001 to 10000000 s]"
        );
        assert_eq!(help("nonexistent"), "");
    }
}
