//! vLLM's spellings on ServeSim's command line. Before clap parses `servesim capacity|sweep|
//! compare ...`, [`split`] moves every argument clap does not define but the core's registry
//! (`servesim_core::vllm::args`) knows — `-tp 4`, `--tensor-parallel-size=4`, `--max_num_seqs
//! 64`, `--enable-expert-parallel`, `--swap-space 16` — with its value out of the command line;
//! `args::apply_deployment` applies them in order through the registry. [`help`] lists them
//! from the same table for `--help`.

use servesim_core::vllm::args::{lookup, registry, Arity, Effect, Origin};
use std::collections::BTreeSet;
use std::ffi::OsString;

/// The subcommands whose deployment flags come from the registry.
pub const SUBCOMMANDS: [&str; 4] = ["capacity", "sweep", "compare", "search"];

/// Splits `argv` (program name first) into what clap parses and the registry's arguments (in
/// order, values attached as the next word). Only for [`SUBCOMMANDS`]; everything after `--`
/// and every word clap defines (long, short or alias) stays with clap.
pub fn split(cmd: &clap::Command, argv: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    let sub_name = argv.get(1).and_then(|s| s.to_str()).unwrap_or("");
    let Some(sub) = SUBCOMMANDS
        .contains(&sub_name)
        .then(|| cmd.find_subcommand(sub_name))
        .flatten()
    else {
        return (argv, Vec::new());
    };
    let mut longs: BTreeSet<String> = BTreeSet::new();
    let mut shorts: BTreeSet<char> = BTreeSet::new();
    let mut takes_value: BTreeSet<String> = BTreeSet::new();
    for a in sub.get_arguments() {
        let value = a.get_action().takes_values();
        for l in a.get_long_and_visible_aliases().into_iter().flatten() {
            longs.insert(l.to_string());
            if value {
                takes_value.insert(l.to_string());
            }
        }
        if let Some(c) = a.get_short() {
            shorts.insert(c);
        }
    }
    for l in ["help", "version"] {
        longs.insert(l.to_string());
    }
    shorts.insert('h');
    let mut keep: Vec<OsString> = argv[..2].to_vec();
    let mut moved: Vec<String> = Vec::new();
    let mut i = 2;
    while i < argv.len() {
        let w = &argv[i];
        i += 1;
        let Some(ws) = w.to_str() else {
            keep.push(w.clone());
            continue;
        };
        if ws == "--" {
            keep.extend(argv[i - 1..].iter().cloned());
            break;
        }
        let name = ws.split_once('=').map_or(ws, |(n, _)| n);
        let clap_owns = match name.strip_prefix("--") {
            Some(l) => longs.contains(l),
            None => {
                let s = name.strip_prefix('-').unwrap_or("");
                s.chars().count() == 1 && s.chars().all(|c| shorts.contains(&c))
            }
        };
        let spec = (!clap_owns && name.starts_with('-') && name.len() > 1)
            .then(|| lookup(name))
            .flatten();
        let dotted = name.starts_with("-O.") || name.starts_with("--compilation-config.");
        match spec {
            Some(sp) => {
                moved.push(ws.to_string());
                if sp.arity == Arity::Value && !ws.contains('=') {
                    if let Some(v) = argv.get(i).and_then(|v| v.to_str()) {
                        moved.push(v.to_string());
                        i += 1;
                    }
                }
            }
            None if !clap_owns && dotted => {
                moved.push(ws.to_string());
                if !ws.contains('=') {
                    if let Some(v) = argv.get(i).and_then(|v| v.to_str()) {
                        moved.push(v.to_string());
                        i += 1;
                    }
                }
            }
            None => {
                keep.push(w.clone());
                // A clap flag's value stays with it even when it starts with '-'.
                let long = name.strip_prefix("--").unwrap_or("");
                if takes_value.contains(long) && !ws.contains('=') && i < argv.len() {
                    keep.push(argv[i].clone());
                    i += 1;
                }
            }
        }
    }
    (keep, moved)
}

/// The `--help` section listing the registry's arguments that set a scenario field.
pub fn help() -> String {
    let mut out = String::from(
        "vLLM arguments (by any spelling vLLM accepts; the table is docs/inputs.md):\n",
    );
    for a in registry() {
        if a.origin == Origin::Env || !matches!(a.effect, Effect::Sets(_)) {
            continue;
        }
        if matches!(a.name, "model" | "gpu") {
            continue;
        }
        let mut names = vec![a.flag()];
        names.extend(a.aliases.iter().map(|s| s.to_string()));
        let v = if a.arity == Arity::Value { " V" } else { "" };
        out.push_str(&format!("  {}{v}\n      {}\n", names.join(", "), a.help));
    }
    out.push_str(
        "Every other `vllm serve` argument in the table is accepted and listed as ignored or not modelled.\n\
--from-manifest FILE and --vllm-command are read first; every flag given beside them wins.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn words(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn vllm_spellings_move_and_clap_flags_stay() {
        let cmd = crate::Cli::command();
        let (keep, moved) = split(
            &cmd,
            words(&[
                "servesim",
                "sweep",
                "--model",
                "m",
                "-tp",
                "4",
                "--gpu",
                "H100",
                "--max_num_seqs=64",
                "--enable-expert-parallel",
                "--concurrency",
                "1,2",
                "-O.cudagraph_mode",
                "FULL",
                "--swap-space",
                "16",
            ]),
        );
        let keep: Vec<&str> = keep.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            keep,
            [
                "servesim",
                "sweep",
                "--model",
                "m",
                "--gpu",
                "H100",
                "--concurrency",
                "1,2"
            ]
        );
        assert_eq!(
            moved,
            [
                "-tp",
                "4",
                "--max_num_seqs=64",
                "--enable-expert-parallel",
                "-O.cudagraph_mode",
                "FULL",
                "--swap-space",
                "16"
            ]
        );
    }

    #[test]
    fn other_subcommands_are_untouched() {
        let cmd = crate::Cli::command();
        let argv = words(&["servesim", "step", "-tp", "4"]);
        let (keep, moved) = split(&cmd, argv.clone());
        assert_eq!(keep, argv);
        assert!(moved.is_empty());
    }

    #[test]
    fn help_lists_the_registry() {
        let h = help();
        assert!(h.contains("--tensor-parallel-size, -tp, --tp V"), "{h}");
        assert!(h.contains("--enable-expert-parallel\n"), "{h}");
        assert!(!h.contains("--swap-space"), "{h}");
    }
}
