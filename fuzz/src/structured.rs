//! Structured inputs drawn with `arbitrary`: documents built from the format's own keys and
//! values, rendered as JSON, YAML (flow or block) or TOML.
//!
//! Byte mutation mostly produces syntax errors, which stop a parser at its first stage. These
//! documents are well-formed (or nearly: a key or value may be arbitrary text), so they reach
//! the checks after parsing: wrong types, missing and unknown fields, values at their limits.

use arbitrary::{Result, Unstructured};

/// A document: what JSON, YAML and TOML have in common.
#[derive(Debug, Clone)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

/// Strings that have broken parsers of paths, ids and templates before.
const TRICKY_STRINGS: &[&str] = &[
    "",
    " ",
    ".",
    "..",
    "../../etc/passwd",
    "/abs/path",
    "a/../../b",
    "-",
    "~",
    "null",
    "true",
    "no",
    "0",
    "{benchmark_dir}",
    "{workspace}",
    "{trace}",
    "{",
    "}",
    "\u{0}",
    "\n",
    "é",
    "\u{2028}",
    "😀",
    "a\tb",
    "*",
    "**/*",
    "[",
];

/// Draws documents; `keys` and `values` are the format's vocabulary (from the seeds and the
/// target's dictionary).
pub struct Gen<'a> {
    pub keys: &'a [String],
    pub values: &'a [String],
}

impl Gen<'_> {
    pub fn node(&self, u: &mut Unstructured, depth: u32) -> Result<Node> {
        let top = if depth >= 4 { 4 } else { 6 };
        Ok(match u.int_in_range(0..=top)? {
            0 => Node::Null,
            1 => Node::Bool(u.arbitrary()?),
            2 => Node::Int(self.int(u)?),
            3 => Node::Float(self.float(u)?),
            4 => Node::Str(self.string(u)?),
            5 => {
                let n = u.int_in_range(0..=4)?;
                Node::Seq((0..n).map(|_| self.node(u, depth + 1)).collect::<Result<_>>()?)
            }
            _ => Node::Map(self.map(u, depth + 1, 5)?),
        })
    }

    /// A map of up to `max` entries, keys mostly from the vocabulary.
    pub fn map(&self, u: &mut Unstructured, depth: u32, max: u32) -> Result<Vec<(String, Node)>> {
        let n = u.int_in_range(0..=max)?;
        (0..n).map(|_| Ok((self.key(u)?, self.node(u, depth)?))).collect()
    }

    pub fn key(&self, u: &mut Unstructured) -> Result<String> {
        if !self.keys.is_empty() && u.ratio(7, 8)? {
            return Ok(u.choose(self.keys)?.clone());
        }
        u.arbitrary()
    }

    pub fn string(&self, u: &mut Unstructured) -> Result<String> {
        Ok(match u.int_in_range(0..=5)? {
            0 | 1 if !self.values.is_empty() => u.choose(self.values)?.clone(),
            2 => u.choose(TRICKY_STRINGS)?.to_string(),
            3 => {
                let unit = u.choose(TRICKY_STRINGS)?;
                unit.repeat(u.int_in_range(1..=2000)?)
            }
            _ => u.arbitrary()?,
        })
    }

    pub fn int(&self, u: &mut Unstructured) -> Result<i64> {
        const EDGES: &[i64] =
            &[0, 1, -1, 2, 1000, i64::MAX, i64::MIN, u32::MAX as i64, u32::MAX as i64 + 1, 1 << 53, -(1 << 31)];
        if u.ratio(1, 2)? { Ok(*u.choose(EDGES)?) } else { u.arbitrary() }
    }

    pub fn float(&self, u: &mut Unstructured) -> Result<f64> {
        const EDGES: &[f64] =
            &[0.0, -0.0, 0.5, 1.0, 1.0000001, -1.0, 1e308, 5e-324, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
        if u.ratio(1, 2)? { Ok(*u.choose(EDGES)?) } else { u.arbitrary() }
    }
}

/// A string quoted as JSON (also a valid YAML double-quoted and TOML basic string for the
/// characters JSON escapes).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// JSON text; non-finite floats are written as the bare words some writers emit.
pub fn json(node: &Node, out: &mut String) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Int(i) => out.push_str(&i.to_string()),
        Node::Float(f) if f.is_nan() => out.push_str("NaN"),
        Node::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "Infinity" } else { "-Infinity" }),
        Node::Float(f) => out.push_str(&format!("{f:?}")),
        Node::Str(s) => out.push_str(&quoted(s)),
        Node::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json(item, out);
            }
            out.push(']');
        }
        Node::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&quoted(k));
                out.push(':');
                json(v, out);
            }
            out.push('}');
        }
    }
}

/// A bare word in YAML and TOML: no quoting needed.
fn is_bare(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn yaml_scalar(node: &Node) -> Option<String> {
    Some(match node {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) if f.is_nan() => ".nan".into(),
        Node::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.into(),
        Node::Float(f) => format!("{f:?}"),
        Node::Str(s) if is_bare(s) && s.as_bytes()[0].is_ascii_alphabetic() => s.clone(),
        Node::Str(s) => quoted(s),
        Node::Seq(items) if items.is_empty() => "[]".into(),
        Node::Map(entries) if entries.is_empty() => "{}".into(),
        _ => return None,
    })
}

fn yaml_key(k: &str) -> String {
    if is_bare(k) { k.to_string() } else { quoted(k) }
}

/// Block-style YAML, the way people write case files.
pub fn yaml(node: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match node {
        Node::Map(entries) if !entries.is_empty() => {
            for (k, v) in entries {
                out.push_str(&pad);
                out.push_str(&yaml_key(k));
                out.push(':');
                match yaml_scalar(v) {
                    Some(s) => {
                        out.push(' ');
                        out.push_str(&s);
                        out.push('\n');
                    }
                    None => {
                        out.push('\n');
                        yaml(v, indent + 2, out);
                    }
                }
            }
        }
        Node::Seq(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push_str("- ");
                match yaml_scalar(item) {
                    Some(s) => out.push_str(&s),
                    None => json(item, out),
                }
                out.push('\n');
            }
        }
        scalar => {
            out.push_str(&pad);
            out.push_str(&yaml_scalar(scalar).unwrap_or_default());
            out.push('\n');
        }
    }
}

fn toml_value(node: &Node, out: &mut String) {
    match node {
        Node::Null => out.push_str("\"\""),
        Node::Float(f) if f.is_nan() => out.push_str("nan"),
        Node::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "inf" } else { "-inf" }),
        Node::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                toml_value(item, out);
            }
            out.push(']');
        }
        Node::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&yaml_key(k));
                out.push_str(" = ");
                toml_value(v, out);
            }
            out.push('}');
        }
        other => json(other, out),
    }
}

/// TOML: top-level maps become `[tables]`, everything else `key = value` lines.
pub fn toml(entries: &[(String, Node)], out: &mut String) {
    for (k, v) in entries.iter().filter(|(_, v)| !matches!(v, Node::Map(_))) {
        out.push_str(&format!("{} = ", yaml_key(k)));
        toml_value(v, out);
        out.push('\n');
    }
    for (k, v) in entries {
        if let Node::Map(fields) = v {
            out.push_str(&format!("\n[{}]\n", yaml_key(k)));
            for (fk, fv) in fields {
                out.push_str(&format!("{} = ", yaml_key(fk)));
                toml_value(fv, out);
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_documents_parse_as_their_format() {
        let keys: Vec<String> = ["id", "tool", "args"].iter().map(|s| s.to_string()).collect();
        let g = Gen { keys: &keys, values: &keys };
        let mut rng = fastrand::Rng::with_seed(3);
        let mut parsed = 0;
        for _ in 0..500 {
            let bytes: Vec<u8> = (0..512).map(|_| rng.u8(..)).collect();
            let mut u = Unstructured::new(&bytes);
            let Ok(entries) = g.map(&mut u, 0, 6) else { continue };
            let doc = Node::Map(entries);
            let mut text = String::new();
            json(&doc, &mut text);
            if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
                parsed += 1;
            }
        }
        // Only non-finite floats make invalid JSON.
        assert!(parsed > 250, "only {parsed} of 500 generated JSON documents parse");
    }
}
