//! Hand-written reading of trace lines, for the kinds that make up a trace's bulk.
//!
//! Why it exists: after [`super::scan`] made skipping cheap, what remained of replay's cost was
//! serde's machinery around the few values the fold reads: each key of each payload went
//! through a key deserializer and a derived field visitor, each value through a visitor, and a
//! `context_packed` event built a `Vec` of its sections before counting them. Here the
//! envelope and the payloads of `context_packed`, `tool_result`, `model_action` and
//! `policy_decision` are walked directly over the line: keys are matched as bytes, values the
//! fold reads are read where they lie, sections are counted as they pass, and everything else
//! is skipped by the same checked skipping as before. Other kinds' payloads go through
//! [`super::lean_body`] on the same scan, so a line is read once.
//!
//! The contract is [`super::scan`]'s: [`parse`] returns exactly what serde_json returns for the
//! line through the envelope visitor, or [`Refused`], after which the caller tries the serde
//! path. So each payload walk reads its kind as the derived types of `replay.rs` do (same
//! required and defaulted fields, unknown keys skipped as checked JSON, integers refused
//! outside their type's range), and refuses what it does not take the same way: a key that
//! comes twice (serde names it an error, or for the envelope takes the last), a key with an
//! escape, a payload written as an array, `data` before `kind`.

use std::borrow::Cow;

use super::scan::{Refused, Scan, Text};
use super::{Lean, LeanBody, LeanContext, LeanToolResult};
use crate::trace::event::{Batch, EventKind, Usage};
use crate::trace::{Header, Parsed};

type Result<T> = std::result::Result<T, Refused>;

/// Parses one trace line as [`super::Lean::parse`] does, or refuses it.
pub(super) fn parse(line: &str) -> Result<(Header<'_>, Parsed<Lean>)> {
    let mut scan = Scan::new(line)?;
    let parsed = envelope(&mut scan)?;
    scan.end()?;
    Ok(parsed)
}

/// Stores the value of a key seen for the first time; a key seen again is refused.
fn once<T>(slot: &mut Option<T>, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(Refused);
    }
    *slot = Some(value);
    Ok(())
}

fn text<'l>(text: Text<'l, '_>) -> Cow<'l, str> {
    match text {
        Text::Line(s) => Cow::Borrowed(s),
        Text::Unescaped(s) => Cow::Owned(s.to_owned()),
    }
}

fn string(scan: &mut Scan) -> Result<String> {
    Ok(text(scan.string()?).into_owned())
}

fn u32_value(scan: &mut Scan) -> Result<u32> {
    u32::try_from(scan.unsigned()?).map_err(|_| Refused)
}

fn usize_value(scan: &mut Scan) -> Result<usize> {
    usize::try_from(scan.unsigned()?).map_err(|_| Refused)
}

fn envelope<'l>(scan: &mut Scan<'l>) -> Result<(Header<'l>, Parsed<Lean>)> {
    let (mut schema_version, mut seq, mut run_id, mut cell_id) = (None, None, None, None);
    let mut kind: Option<Parsed<EventKind>> = None;
    let mut body = None;
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"schema_version" => once(&mut schema_version, u32_value(scan)?)?,
            b"seq" => once(&mut seq, scan.unsigned()?)?,
            b"run_id" => once(&mut run_id, text(scan.string()?))?,
            b"cell_id" => once(&mut cell_id, text(scan.string()?))?,
            b"kind" => {
                let tag = text(scan.string()?);
                let tag = match EventKind::from_tag(&tag) {
                    Some(k) => Parsed::Known(k),
                    None => Parsed::UnknownKind(tag.into_owned()),
                };
                once(&mut kind, tag)?;
            }
            b"data" => match &kind {
                Some(Parsed::Known(k)) => once(&mut body, data(*k, scan)?)?,
                // The payload of an unknown kind is not looked at, only checked.
                Some(Parsed::UnknownKind(_)) => once(&mut body, LeanBody::Other).and_then(|()| scan.skip_value())?,
                // The payload before its kind: the serde path keeps it raw.
                None => return Err(Refused),
            },
            _ => scan.skip_value()?,
        }
    }
    let header = Header {
        schema_version: schema_version.ok_or(Refused)?,
        seq: seq.ok_or(Refused)?,
        run_id: run_id.ok_or(Refused)?,
        cell_id: cell_id.ok_or(Refused)?,
    };
    match (kind.ok_or(Refused)?, body) {
        (Parsed::UnknownKind(tag), _) => Ok((header, Parsed::UnknownKind(tag))),
        (Parsed::Known(kind), Some(body)) => Ok((header, Parsed::Known(Lean { kind, body }))),
        (Parsed::Known(_), None) => Err(Refused),
    }
}

/// The payload of a known kind.
fn data(kind: EventKind, scan: &mut Scan) -> Result<LeanBody> {
    match kind {
        EventKind::ContextPacked => context_packed(scan),
        EventKind::ToolResult => tool_result(scan),
        EventKind::ModelAction => model_action(scan),
        EventKind::PolicyDecision => policy_decision(scan),
        _ => super::lean_body(kind, scan),
    }
}

/// `JustContext`: `sections` (required), `total_tokens` (default 0).
fn context_packed(scan: &mut Scan) -> Result<LeanBody> {
    let (mut sections, mut total_tokens) = (None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"sections" => once(&mut sections, context_sections(scan)?)?,
            b"total_tokens" => once(&mut total_tokens, usize_value(scan)?)?,
            _ => scan.skip_value()?,
        }
    }
    let mut context = sections.ok_or(Refused)?;
    context.total_tokens = total_tokens.unwrap_or(0) as u64;
    Ok(LeanBody::ContextPacked(context))
}

/// The sections of a `context_packed` event, each counted as it passes (`JustSection`:
/// `reduced` and `dropped`, both defaulted).
fn context_sections(scan: &mut Scan) -> Result<LeanContext> {
    let mut context = LeanContext::default();
    scan.open(b'[')?;
    let mut first = true;
    while scan.next_entry(&mut first, b']')? {
        let (mut reduced, mut dropped) = (None, None);
        scan.open(b'{')?;
        let mut first_key = true;
        while scan.next_entry(&mut first_key, b'}')? {
            match scan.plain_key()? {
                b"reduced" => once(&mut reduced, scan.boolean()?)?,
                b"dropped" => once(&mut dropped, usize_value(scan)?)?,
                _ => scan.skip_value()?,
            }
        }
        context.add_section(reduced.unwrap_or(false), dropped.unwrap_or(0));
    }
    Ok(context)
}

/// `LeanToolResult`: `step`, `tool`, `ok` (required), `denied`, `modified`, `read` (defaulted).
fn tool_result(scan: &mut Scan) -> Result<LeanBody> {
    let (mut step, mut tool, mut ok, mut denied, mut modified, mut read) = (None, None, None, None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"step" => once(&mut step, u32_value(scan)?)?,
            b"tool" => once(&mut tool, string(scan)?)?,
            b"ok" => once(&mut ok, scan.boolean()?)?,
            b"denied" => once(&mut denied, scan.boolean()?)?,
            b"modified" => once(&mut modified, strings(scan)?)?,
            b"read" => {
                let value = if scan.null()? { None } else { Some(string(scan)?) };
                once(&mut read, value)?;
            }
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::ToolResult(LeanToolResult {
        step: step.ok_or(Refused)?,
        tool: tool.ok_or(Refused)?,
        ok: ok.ok_or(Refused)?,
        denied: denied.unwrap_or(false),
        modified: modified.unwrap_or_default(),
        read: read.flatten(),
    }))
}

/// An array of strings.
fn strings(scan: &mut Scan) -> Result<Vec<String>> {
    let mut items = Vec::new();
    scan.open(b'[')?;
    let mut first = true;
    while scan.next_entry(&mut first, b']')? {
        items.push(string(scan)?);
    }
    Ok(items)
}

/// `JustUsage`: `usage` and `batch`, both optional.
fn model_action(scan: &mut Scan) -> Result<LeanBody> {
    let (mut usage, mut batch) = (None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"usage" => {
                let value = if scan.null()? { None } else { Some(usage_value(scan)?) };
                once(&mut usage, value)?;
            }
            b"batch" => {
                let value = if scan.null()? { None } else { Some(batch_value(scan)?) };
                once(&mut batch, value)?;
            }
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::ModelAction { usage: usage.flatten(), batch: batch.flatten() })
}

/// [`Usage`]: both token counts required, the cached count optional.
fn usage_value(scan: &mut Scan) -> Result<Usage> {
    let (mut input, mut output, mut cached) = (None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"input_tokens" => once(&mut input, scan.unsigned()?)?,
            b"output_tokens" => once(&mut output, scan.unsigned()?)?,
            b"cached_input_tokens" => {
                let value = if scan.null()? { None } else { Some(scan.unsigned()?) };
                once(&mut cached, value)?;
            }
            _ => scan.skip_value()?,
        }
    }
    Ok(Usage {
        input_tokens: input.ok_or(Refused)?,
        output_tokens: output.ok_or(Refused)?,
        cached_input_tokens: cached.flatten(),
    })
}

/// [`Batch`]: every field required.
fn batch_value(scan: &mut Scan) -> Result<Batch> {
    let (mut id, mut position, mut size) = (None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"id" => once(&mut id, u32_value(scan)?)?,
            b"position" => once(&mut position, u32_value(scan)?)?,
            b"size" => once(&mut size, u32_value(scan)?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(Batch { id: id.ok_or(Refused)?, position: position.ok_or(Refused)?, size: size.ok_or(Refused)? })
}

/// `JustDecision`: `allowed` (required), `invalid` (default false).
fn policy_decision(scan: &mut Scan) -> Result<LeanBody> {
    let (mut allowed, mut invalid) = (None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"allowed" => once(&mut allowed, scan.boolean()?)?,
            b"invalid" => once(&mut invalid, scan.boolean()?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::PolicyDecision { allowed: allowed.ok_or(Refused)?, invalid: invalid.unwrap_or(false) })
}
