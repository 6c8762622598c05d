//! How report.html carries its timelines: rendered `<section>` markup, as JSON, gzip-compressed
//! and base64-encoded. The page inflates a bundle with the browser's own `DecompressionStream`
//! (templates/inflate.js) the first time a timeline is needed.
//!
//! Why: a timeline's markup is mostly the same tags and indentation over and over, so a page's
//! timelines compress about twentyfold, and they were most of a run directory's bytes (6.6 KB of
//! a HumanEval-shaped cell's 11 KB). The markup stays the one the templates render, escaped as
//! before: the bundle only changes how it travels. Base64 holds no `<`, `&` or quote, so a
//! bundle cannot end the element it sits in, and the encoding is deterministic (no time in the
//! gzip header), so `hcbench report` still reproduces a page byte for byte.
//!
//! [`readable`] turns a page or side file back into the markup it stands for, for tests and for
//! anyone who wants to grep a report.

use std::io::{Read, Write};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::Serialize;

use super::ExportError;

/// The element of a one-file page that holds its bundle.
pub const PAGE_ELEMENT_ID: &str = "timelines-z";
/// What a side file calls with its bundle (templates/report_split.js defines it).
pub const SIDE_CALL: &str = "hcbenchTimelines(";

/// `value` as JSON, gzip-compressed, base64-encoded.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<String, ExportError> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    serde_json::to_writer(&mut gz, value)
        .map_err(|e| ExportError::Render { format: "html", message: format!("timeline bundle: {e}") })?;
    let packed = gz.finish().map_err(ExportError::Stream)?;
    Ok(STANDARD.encode(packed))
}

/// The JSON text a bundle stands for.
pub fn decode(bundle: &str) -> Result<String, String> {
    let packed = STANDARD.decode(bundle.trim()).map_err(|e| format!("not base64: {e}"))?;
    let mut json = String::new();
    GzDecoder::new(packed.as_slice()).read_to_string(&mut json).map_err(|e| format!("not gzip of UTF-8: {e}"))?;
    Ok(json)
}

/// `text` (a report.html, or a side file of a split page) with every timeline bundle replaced
/// by the sections it holds, one after another: the markup a browser shows once it has inflated
/// them. Text without a bundle is returned as it is; a bundle that does not decode is an error.
pub fn readable(text: &str) -> Result<String, String> {
    let page_open = format!("<script type=\"application/octet-stream\" id=\"{PAGE_ELEMENT_ID}\">");
    let (start, end) = if let Some(at) = text.find(&page_open) {
        let from = at + page_open.len();
        let to = from + text[from..].find("</script>").ok_or("the timeline bundle is not closed")?;
        (from, to)
    } else if text.starts_with(SIDE_CALL) {
        let from = text.find('"').ok_or("the side file's call has no bundle")? + 1;
        let to = from + text[from..].find('"').ok_or("the side file's bundle is not closed")?;
        (from, to)
    } else {
        return Ok(text.to_string());
    };
    let json: serde_json::Value =
        serde_json::from_str(&decode(&text[start..end])?).map_err(|e| format!("the bundle is not JSON: {e}"))?;
    let sections: Vec<&str> = match &json {
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        serde_json::Value::Object(map) => map.values().filter_map(|v| v.as_str()).collect(),
        _ => return Err("the bundle holds neither a list nor a map of sections".into()),
    };
    let mut out = String::with_capacity(text.len() + sections.iter().map(|s| s.len()).sum::<usize>());
    out.push_str(&text[..start]);
    for s in sections {
        out.push_str(s);
        out.push('\n');
    }
    out.push_str(&text[end..]);
    Ok(out)
}

/// Writes `value`'s bundle as a JavaScript string literal (base64 needs no escapes).
pub(crate) fn write_quoted<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> Result<(), ExportError> {
    let bundle = encode(value)?;
    out.write_all(b"\"")?;
    out.write_all(bundle.as_bytes())?;
    out.write_all(b"\"")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_round_trips_and_is_deterministic() {
        let sections = vec!["<section id=\"tl-a\">a &lt;b&gt;</section>".to_string(), "<section>é</section>".into()];
        let a = encode(&sections).unwrap();
        assert_eq!(a, encode(&sections).unwrap(), "the same input gives the same bytes");
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)), "{a}");
        assert_eq!(decode(&a).unwrap(), serde_json::to_string(&sections).unwrap());
    }

    #[test]
    fn readable_restores_the_sections_of_a_page_and_of_a_side_file() {
        let bundle = encode(&["<section>one</section>", "<section>two</section>"]).unwrap();
        let page = format!(
            "<p>x</p><script type=\"application/octet-stream\" id=\"{PAGE_ELEMENT_ID}\">{bundle}</script><p>y</p>"
        );
        let text = readable(&page).unwrap();
        assert!(text.contains("<section>one</section>\n<section>two</section>"), "{text}");
        assert!(text.starts_with("<p>x</p>") && text.ends_with("</script><p>y</p>"), "{text}");

        let side =
            format!("{SIDE_CALL}3,\"{}\");\n", encode(&serde_json::json!({"c": "<section>c</section>"})).unwrap());
        assert!(readable(&side).unwrap().contains("<section>c</section>"));
        assert_eq!(readable("<p>no bundle</p>").unwrap(), "<p>no bundle</p>");
        let broken = format!("<script type=\"application/octet-stream\" id=\"{PAGE_ELEMENT_ID}\">!!!</script>");
        assert!(readable(&broken).unwrap_err().contains("base64"));
    }
}
