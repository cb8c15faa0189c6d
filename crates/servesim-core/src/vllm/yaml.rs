//! Bounded YAML reading for deployment manifests: the events of `saphyr-parser` (pure Rust, no
//! `unsafe`, builds for wasm32) folded into a small tree ([`Node`]), one per `---` document, with
//! stated limits so hostile input cannot exhaust memory: at most [`MAX_MANIFEST_BYTES`] of text,
//! [`MAX_DEPTH`] levels of nesting and [`MAX_NODES`] nodes after aliases are expanded (an alias
//! copies its anchor, so a "billion laughs" document is refused when the copies would pass the
//! node budget, before anything is copied). Tags are ignored; `<<` merge keys are applied.
//! docs/inputs.md "Manifests".

use saphyr_parser::{Event, Parser, ScalarStyle};

/// Longest manifest text read (1 MiB; a deployment manifest is a few KB).
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// Deepest nesting of mappings and sequences (Kubernetes manifests nest about 12 deep).
pub const MAX_DEPTH: usize = 64;
/// Most nodes (scalars, mappings, sequences), counted after aliases are expanded.
pub const MAX_NODES: usize = 100_000;

/// One YAML value. Scalars keep their text; `plain` is false for quoted and block scalars
/// (so `"true"` stays a string and `true` is a boolean).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    /// Entries in document order (keys are scalar text; a complex key reads as `?`).
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The value under `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// `get` through a path of keys.
    pub fn at(&self, path: &[&str]) -> Option<&Node> {
        path.iter().try_fold(self, |n, k| n.get(k))
    }

    /// A scalar's text (None for null, mappings and sequences).
    pub fn str(&self) -> Option<&str> {
        match self {
            Node::Scalar { text, plain } => (!(*plain
                && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL")))
            .then_some(text.as_str()),
            _ => None,
        }
    }

    pub fn seq(&self) -> &[Node] {
        match self {
            Node::Seq(v) => v,
            _ => &[],
        }
    }

    pub fn entries(&self) -> &[(String, Node)] {
        match self {
            Node::Map(m) => m,
            _ => &[],
        }
    }

    /// A YAML boolean (`true`/`false` in any case, plain or quoted as the Helm charts accept).
    pub fn bool(&self) -> Option<bool> {
        match self.str()?.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Some(true),
            "false" | "no" | "off" => Some(false),
            _ => None,
        }
    }
}

/// A completed node and how many nodes it holds (itself included).
struct Built {
    node: Node,
    count: usize,
}

enum Frame {
    Seq {
        items: Vec<Node>,
        count: usize,
        anchor: usize,
    },
    Map {
        entries: Vec<(String, Node)>,
        key: Option<String>,
        count: usize,
        anchor: usize,
    },
}

struct Builder {
    stack: Vec<Frame>,
    docs: Vec<Node>,
    /// Anchored nodes by anchor id, with their node counts.
    anchors: Vec<Option<(Node, usize)>>,
    nodes: usize,
}

impl Builder {
    fn budget(&mut self, n: usize) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(format!(
                "the manifest has more than {MAX_NODES} YAML nodes once its aliases are expanded; ServeSim reads at most {MAX_NODES} (paste the vLLM deployment's own documents)"
            ));
        }
        Ok(())
    }

    fn anchor(&mut self, id: usize, node: &Node, count: usize) -> Result<(), String> {
        if id == 0 {
            return Ok(());
        }
        // The kept copy counts against the budget too.
        self.budget(count)?;
        if self.anchors.len() <= id {
            self.anchors.resize(id + 1, None);
        }
        self.anchors[id] = Some((node.clone(), count));
        Ok(())
    }

    /// Puts a finished node into its parent (or makes it a document's root).
    fn insert(&mut self, b: Built) {
        match self.stack.last_mut() {
            None => self.docs.push(b.node),
            Some(Frame::Seq { items, count, .. }) => {
                *count += b.count;
                items.push(b.node);
            }
            Some(Frame::Map {
                entries,
                key,
                count,
                ..
            }) => {
                *count += b.count;
                match key.take() {
                    None => {
                        *key = Some(match b.node {
                            Node::Scalar { text, .. } => text,
                            _ => "?".into(),
                        })
                    }
                    Some(k) if k == "<<" => merge(entries, b.node),
                    Some(k) => {
                        // A key set after a `<<` merge replaces the merged value.
                        entries.retain(|(e, _)| *e != k);
                        entries.push((k, b.node));
                    }
                }
            }
        }
    }

    fn open(&mut self, f: Frame) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!(
                "the manifest nests deeper than {MAX_DEPTH} levels; ServeSim reads at most {MAX_DEPTH}"
            ));
        }
        self.budget(1)?;
        self.stack.push(f);
        Ok(())
    }
}

/// `<<: *base` (or a list of them): the merged mapping's keys that the mapping does not set.
fn merge(entries: &mut Vec<(String, Node)>, from: Node) {
    let sources = match from {
        Node::Seq(v) => v,
        other => vec![other],
    };
    for src in sources {
        if let Node::Map(m) = src {
            for (k, v) in m {
                if !entries.iter().any(|(e, _)| *e == k) {
                    entries.push((k, v));
                }
            }
        }
    }
}

/// Reads every document of `text` (separated by `---`). Errors name the line and column.
/// Kubernetes (Go's YAML reader) accepts a flow collection whose closing line is indented like
/// its key (`args: [` ... `]` under `args`, as the vLLM docs write it); strict YAML 1.2 does not,
/// so on an indentation error the text is read once more with the lines inside flow
/// collections indented two more spaces (which changes no value).
pub fn parse_documents(text: &str) -> Result<Vec<Node>, String> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(format!(
            "the manifest is {} bytes; ServeSim reads at most {} (1 MiB): paste the vLLM deployment's own documents",
            text.len(),
            MAX_MANIFEST_BYTES
        ));
    }
    match parse_strict(text) {
        Err(e) if e.contains("indentation") => {
            parse_strict(&indent_flow_lines(text)).map_err(|_| e)
        }
        r => r,
    }
}

/// The lines that start inside a flow collection (`[`/`{` open, outside quotes and comments),
/// two spaces further in.
fn indent_flow_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut depth: u32 = 0;
    for line in text.split_inclusive('\n') {
        let (mut sq, mut dq) = (false, false);
        if depth > 0 {
            out.push_str("  ");
        }
        let mut prev = ' ';
        for c in line.chars() {
            match c {
                '\'' if !dq => sq = !sq,
                '"' if !sq && prev != '\\' => dq = !dq,
                '#' if !sq && !dq && (prev == ' ' || prev == '\t') => break,
                '[' | '{' if !sq && !dq => depth = depth.saturating_add(1),
                ']' | '}' if !sq && !dq => depth = depth.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
        out.push_str(line);
    }
    out
}

fn parse_strict(text: &str) -> Result<Vec<Node>, String> {
    let mut b = Builder {
        stack: Vec::new(),
        docs: Vec::new(),
        anchors: Vec::new(),
        nodes: 0,
    };
    for ev in Parser::new_from_str(text) {
        let (ev, _span) = ev.map_err(|e| {
            format!(
                "YAML line {} column {}: {}",
                e.marker().line(),
                e.marker().col() + 1,
                e.info()
            )
        })?;
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                b.budget(1)?;
                let node = Node::Scalar {
                    text: text.into_owned(),
                    plain: style == ScalarStyle::Plain,
                };
                b.anchor(anchor, &node, 1)?;
                b.insert(Built { node, count: 1 });
            }
            Event::SequenceStart(anchor, _) => b.open(Frame::Seq {
                items: Vec::new(),
                count: 1,
                anchor,
            })?,
            Event::MappingStart(anchor, _) => b.open(Frame::Map {
                entries: Vec::new(),
                key: None,
                count: 1,
                anchor,
            })?,
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, count, anchor) = match b.stack.pop() {
                    Some(Frame::Seq {
                        items,
                        count,
                        anchor,
                    }) => (Node::Seq(items), count, anchor),
                    Some(Frame::Map {
                        entries,
                        count,
                        anchor,
                        ..
                    }) => (Node::Map(entries), count, anchor),
                    None => return Err("YAML: a collection ends that never started".into()),
                };
                b.anchor(anchor, &node, count)?;
                b.insert(Built { node, count });
            }
            Event::Alias(id) => {
                let Some(Some((_, count))) = b.anchors.get(id) else {
                    return Err(
                        "YAML: an alias (*name) refers to no anchor (&name) before it".into(),
                    );
                };
                let count = *count;
                b.budget(count)?;
                let node = b.anchors[id].as_ref().map(|(n, _)| n.clone());
                if let Some(node) = node {
                    b.insert(Built { node, count });
                }
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd
            | Event::Nothing => {}
        }
    }
    Ok(b.docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_scalars_and_merge_keys() {
        let docs = parse_documents(
            "a: 1\nb: \"true\"\nc: true\nd: ~\n---\nbase: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nlist: [p, 'q']\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].get("a").and_then(Node::str), Some("1"));
        assert_eq!(docs[0].get("b").and_then(Node::bool), Some(true));
        assert_eq!(docs[0].get("c").and_then(Node::bool), Some(true));
        assert_eq!(docs[0].get("d").and_then(Node::str), None);
        let u = docs[1].get("use").unwrap();
        assert_eq!(u.get("x").and_then(Node::str), Some("1"));
        assert_eq!(u.get("y").and_then(Node::str), Some("3"));
        assert_eq!(docs[1].get("list").unwrap().seq().len(), 2);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_documents("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.starts_with("YAML line"), "{e}");
        let e = parse_documents("x: *nope\n").unwrap_err();
        assert!(e.contains("alias") || e.contains("anchor"), "{e}");
    }

    #[test]
    fn alias_bombs_are_refused_before_they_expand() {
        // "billion laughs": nine levels of nine aliases would be 9^9 nodes.
        let mut y = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..9 {
            let p = i - 1;
            y.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse_documents(&y).unwrap_err();
        assert!(e.contains(&MAX_NODES.to_string()), "{e}");
        // One big anchor referenced many times: refused by the same budget.
        let mut y = String::from("big: &b [");
        y.push_str(&vec!["x"; 5000].join(", "));
        y.push_str("]\nuses: [");
        y.push_str(&vec!["*b"; 100].join(", "));
        y.push_str("]\n");
        assert!(parse_documents(&y).unwrap_err().contains("nodes"));
    }

    #[test]
    fn depth_and_size_limits() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        let e = parse_documents(&deep).unwrap_err();
        assert!(e.contains("64") || e.contains("recursion"), "{e}");
        let mut deep_block = String::new();
        for i in 0..100 {
            deep_block.push_str(&" ".repeat(i));
            deep_block.push_str("k:\n");
        }
        assert!(parse_documents(&deep_block)
            .unwrap_err()
            .contains(&MAX_DEPTH.to_string()));
        let big = "a: b\n".repeat(MAX_MANIFEST_BYTES / 5 + 1);
        assert!(parse_documents(&big).unwrap_err().contains("1 MiB"));
    }
}
