//! The form's vLLM engine arguments with a plain value ("Advanced: vLLM engine arguments";
//! docs/web.md "Form fields from one table"): one line of [`engine_args!`] per argument names the
//! scenario's `engine` field (`RawEngineSettings`, the core's definition) and gives its control
//! (label = vLLM's flag, unit, text field or on/off select). From that line alone come the
//! form's text for it ([`EngineArgsForm`]), reading the scenario into the form and back (errors
//! keyed by the field), the control on the page (`app.rs` renders [`ENGINE_ARGS`] in order) and
//! where the core's errors on `engine.<field>` show ([`engine_form_key`]). Adding an argument of
//! this kind is the core's field plus one line here. Arguments with named values and their own
//! checks (`cudagraph_mode`, `all2all_backend`), the speculative and offload sections have
//! their own modules.

use crate::core_api::deploy::RawEngineSettings;
use crate::form::{fmt_f, FieldErrors};

/// How an argument is edited on the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// A text field (blank: vLLM's default, shown greyed).
    Text,
    /// vLLM's default / on / off; `default` names what vLLM does when the flag is absent.
    OnOff { default: &'static str },
}

/// One engine argument of the form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineArg {
    /// The scenario's `engine.<key>` and the form field's key (`#f-<key>` on the page).
    pub key: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
    pub control: Control,
}

/// A value type of an engine argument: how it shows in its field and how the text reads back.
pub trait ArgValue: Sized {
    fn show(v: Option<&Self>) -> String;
    /// Blank is `None` (vLLM's default); text that does not read is an error on `key`.
    fn read(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<Self>;
}

impl ArgValue for f64 {
    fn show(v: Option<&f64>) -> String {
        v.map(|x| fmt_f(*x)).unwrap_or_default()
    }
    fn read(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<f64> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                e.insert(key, "a number".into());
                None
            }
        }
    }
}

impl ArgValue for i64 {
    fn show(v: Option<&i64>) -> String {
        v.map(|x| x.to_string()).unwrap_or_default()
    }
    fn read(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<i64> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        // `--max-model-len auto` is vLLM's -1 (the scenario's value; docs/capacity.md).
        if key == "max_model_len" && t.eq_ignore_ascii_case("auto") {
            return Some(-1);
        }
        match t.parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) if key == "max_model_len" => {
                e.insert(key, "a whole number of tokens, or auto (-1)".into());
                None
            }
            Err(_) => {
                e.insert(key, "a whole number".into());
                None
            }
        }
    }
}

impl ArgValue for bool {
    fn show(v: Option<&bool>) -> String {
        v.map(|b| b.to_string()).unwrap_or_default()
    }
    fn read(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<bool> {
        match text.trim() {
            "" => None,
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                e.insert(key, "choose on, off or vLLM's default".into());
                None
            }
        }
    }
}

/// `field: value type, label, unit, control;` per argument, in the page's order.
macro_rules! engine_args {
    ($( $key:ident : $ty:ty, $label:literal, $unit:literal, $control:expr; )*) => {
        /// The engine arguments' text, one `String` per [`ENGINE_ARGS`] entry.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct EngineArgsForm {
            $( pub $key: String, )*
        }

        /// Every argument of [`EngineArgsForm`], in the page's order.
        pub const ENGINE_ARGS: &[EngineArg] = &[
            $( EngineArg { key: stringify!($key), label: $label, unit: $unit, control: $control }, )*
        ];

        impl EngineArgsForm {
            /// The fields for a scenario's engine settings (blank where the scenario has none).
            pub fn of(en: &RawEngineSettings) -> EngineArgsForm {
                let mut f = EngineArgsForm {
                    $( $key: <$ty as ArgValue>::show(en.$key.as_ref()), )*
                };
                // vLLM's -1 reads as the word it is typed as.
                if en.max_model_len == Some(-1) {
                    f.max_model_len = "auto".into();
                }
                f
            }

            /// Writes the fields into `en` (blank = `None`, vLLM's default); text that does not
            /// read is an error under its field.
            pub fn write(&self, en: &mut RawEngineSettings, e: &mut FieldErrors) {
                $( en.$key = <$ty as ArgValue>::read(e, stringify!($key), &self.$key); )*
            }

            /// The text of the field `key` (None for a key that is not an engine argument).
            pub fn get(&self, key: &str) -> Option<&String> {
                match key {
                    $( stringify!($key) => Some(&self.$key), )*
                    _ => None,
                }
            }

            /// Sets the text of the field `key` (a key that is not an engine argument is ignored).
            pub fn set(&mut self, key: &str, text: String) {
                match key {
                    $( stringify!($key) => self.$key = text, )*
                    _ => {}
                }
            }
        }
    };
}

engine_args! {
    gpu_memory_utilization: f64, "--gpu-memory-utilization", "", Control::Text;
    max_num_seqs: i64, "--max-num-seqs", "", Control::Text;
    max_num_batched_tokens: i64, "--max-num-batched-tokens", "tok", Control::Text;
    block_size: i64, "--block-size", "tok", Control::Text;
    max_model_len: i64, "--max-model-len", "tok", Control::Text;
    long_prefill_token_threshold: i64, "--long-prefill-token-threshold", "tok", Control::Text;
    kv_cache_memory_bytes: i64, "--kv-cache-memory (overrides utilisation)", "bytes", Control::Text;
    enable_prefix_caching: bool, "--enable-prefix-caching", "", Control::OnOff { default: "on" };
    enable_chunked_prefill: bool, "--enable-chunked-prefill", "", Control::OnOff { default: "on" };
    enforce_eager: bool, "--enforce-eager", "", Control::OnOff { default: "off" };
    language_model_only: bool, "--language-model-only", "", Control::OnOff { default: "off" };
    mm_encoder_data_parallel: bool, "--mm-encoder-tp-mode data", "", Control::OnOff { default: "off" };
    num_scheduler_steps: i64, "--num-scheduler-steps (vLLM V0, before 0.8)", "steps", Control::Text;
}

/// The form field of a core error at `engine.<key>` (or below it), for the arguments above.
pub fn engine_form_key(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("engine.")?;
    let head = rest.split(['.', '[']).next()?;
    ENGINE_ARGS.iter().find(|a| a.key == head).map(|a| a.key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_goes_to_its_scenario_field_and_back() {
        let en = RawEngineSettings {
            gpu_memory_utilization: Some(0.85),
            max_num_seqs: Some(128),
            max_num_batched_tokens: Some(4096),
            block_size: Some(32),
            max_model_len: Some(8192),
            long_prefill_token_threshold: Some(512),
            kv_cache_memory_bytes: Some(1 << 34),
            enable_prefix_caching: Some(false),
            enable_chunked_prefill: Some(false),
            enforce_eager: Some(true),
            num_scheduler_steps: Some(8),
            ..RawEngineSettings::default()
        };
        let f = EngineArgsForm::of(&en);
        assert_eq!(f.num_scheduler_steps, "8");
        assert_eq!(f.max_num_seqs, "128");
        assert_eq!(f.gpu_memory_utilization, "0.85");
        assert_eq!(f.enforce_eager, "true");
        let mut back = RawEngineSettings::default();
        let mut e = FieldErrors::new();
        f.write(&mut back, &mut e);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(back, en);
        // `auto` in the context field is vLLM's -1.
        let mut g = EngineArgsForm::default();
        g.set("max_model_len", "Auto".into());
        let mut back = RawEngineSettings::default();
        g.write(&mut back, &mut e);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(back.max_model_len, Some(-1));
        assert_eq!(EngineArgsForm::of(&back).max_model_len, "auto");
        // Every table entry reads and writes its own field.
        for a in ENGINE_ARGS {
            let mut g = EngineArgsForm::default();
            g.set(a.key, "x".into());
            assert_eq!(g.get(a.key).map(String::as_str), Some("x"), "{}", a.key);
            let mut e = FieldErrors::new();
            g.write(&mut RawEngineSettings::default(), &mut e);
            assert_eq!(
                e.keys().copied().collect::<Vec<_>>(),
                vec![a.key],
                "{}",
                a.key
            );
            assert_eq!(engine_form_key(&format!("engine.{}", a.key)), Some(a.key));
        }
        assert_eq!(EngineArgsForm::default().get("tp"), None);
        assert_eq!(engine_form_key("engine.cudagraph_mode"), None);
        assert_eq!(engine_form_key("tp"), None);
    }

    #[test]
    fn blank_is_vllms_default_and_bad_text_names_the_field() {
        let mut f = EngineArgsForm {
            gpu_memory_utilization: "lots".into(),
            max_num_seqs: "1.5".into(),
            ..EngineArgsForm::default()
        };
        let mut en = RawEngineSettings::default();
        let mut e = FieldErrors::new();
        f.write(&mut en, &mut e);
        assert_eq!(e["gpu_memory_utilization"], "a number");
        assert_eq!(e["max_num_seqs"], "a whole number");
        assert_eq!(en, RawEngineSettings::default());
        f.gpu_memory_utilization = " ".into();
        f.max_num_seqs = "NaN".into();
        let mut e = FieldErrors::new();
        f.write(&mut en, &mut e);
        assert!(!e.contains_key("gpu_memory_utilization"));
        assert!(e.contains_key("max_num_seqs"));
    }
}
