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
use serde::Deserialize as _;

use super::names::Name;
use super::{Lean, LeanBody, LeanContext, LeanRunFinished, LeanRunStarted, LeanToolResult};
use crate::trace::event::{Batch, EventKind, ModelInfo, Outcome, Usage};
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

/// A string read straight into a [`Name`] (one allocation, where a `String` then a `Name` take two).
fn name(scan: &mut Scan) -> Result<Name> {
    Ok(match scan.string()? {
        Text::Line(s) => Name::from(s),
        Text::Unescaped(s) => Name::from(s),
    })
}

/// `null` as `None`, anything else read by `read`: an `Option` field.
fn nullable<T>(scan: &mut Scan, read: impl FnOnce(&mut Scan) -> Result<T>) -> Result<Option<T>> {
    if scan.null()? { Ok(None) } else { read(scan).map(Some) }
}

/// A number read as `f64`, as serde_json reads it: a plain unsigned integer here, any other
/// number by serde_json itself ([`Scan`]'s `deserialize_any`), so rounding is serde_json's.
fn f64_value(scan: &mut Scan) -> Result<f64> {
    f64::deserialize(&mut *scan)
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
        EventKind::RunStarted => run_started(scan),
        EventKind::TestResult => test_result(scan),
        EventKind::VerifierResult => verifier_result(scan),
        EventKind::RunFinished => run_finished(scan),
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
            b"read" => once(&mut read, nullable(scan, string)?)?,
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
            b"usage" => once(&mut usage, nullable(scan, usage_value)?)?,
            b"batch" => once(&mut batch, nullable(scan, batch_value)?)?,
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
            b"cached_input_tokens" => once(&mut cached, nullable(scan, |s| s.unsigned())?)?,
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

/// `LeanRunStarted`: `case_id`, `category`, `split`, `profile`, `model`, `step_budget`
/// (required), `epoch` (default 1), `agent_spec` and `ablation` (default empty).
fn run_started(scan: &mut Scan) -> Result<LeanBody> {
    let (mut case_id, mut category, mut split, mut profile) = (None, None, None, None);
    let (mut model, mut step_budget, mut epoch, mut agent_spec, mut ablation) = (None, None, None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"case_id" => once(&mut case_id, name(scan)?)?,
            b"category" => once(&mut category, name(scan)?)?,
            b"split" => once(&mut split, name(scan)?)?,
            b"profile" => once(&mut profile, name(scan)?)?,
            b"model" => once(&mut model, model_info(scan)?)?,
            b"step_budget" => once(&mut step_budget, u32_value(scan)?)?,
            b"epoch" => once(&mut epoch, u32_value(scan)?)?,
            b"agent_spec" => once(&mut agent_spec, name(scan)?)?,
            b"ablation" => once(&mut ablation, name(scan)?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::RunStarted(Box::new(LeanRunStarted {
        case_id: case_id.ok_or(Refused)?,
        category: category.ok_or(Refused)?,
        split: split.ok_or(Refused)?,
        profile: profile.ok_or(Refused)?,
        model: model.ok_or(Refused)?,
        step_budget: step_budget.ok_or(Refused)?,
        epoch: epoch.unwrap_or(1),
        agent_spec: agent_spec.unwrap_or_default(),
        ablation: ablation.unwrap_or_default(),
    })))
}

/// [`ModelInfo`]: `provider` and `model` required, the rest optional (null or absent).
fn model_info(scan: &mut Scan) -> Result<ModelInfo> {
    let (mut provider, mut model, mut base_url, mut effort, mut input_price, mut output_price) =
        (None, None, None, None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"provider" => once(&mut provider, string(scan)?)?,
            b"model" => once(&mut model, string(scan)?)?,
            b"base_url" => once(&mut base_url, nullable(scan, string)?)?,
            b"reasoning_effort" => once(&mut effort, nullable(scan, string)?)?,
            b"input_price_per_mtok" => once(&mut input_price, nullable(scan, f64_value)?)?,
            b"output_price_per_mtok" => once(&mut output_price, nullable(scan, f64_value)?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(ModelInfo {
        provider: provider.ok_or(Refused)?,
        model: model.ok_or(Refused)?,
        base_url: base_url.flatten(),
        reasoning_effort: effort.flatten(),
        input_price_per_mtok: input_price.flatten(),
        output_price_per_mtok: output_price.flatten(),
    })
}

/// `JustPassed`: `passed` (required).
fn test_result(scan: &mut Scan) -> Result<LeanBody> {
    let mut passed = None;
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"passed" => once(&mut passed, scan.boolean()?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::TestResult { passed: passed.ok_or(Refused)? })
}

/// `JustVerifier`: `passed` (required), `metrics` (default empty; its values are JSON values,
/// read through [`Scan`]'s serde deserializer as the serde path reads them).
fn verifier_result(scan: &mut Scan) -> Result<LeanBody> {
    let (mut passed, mut metrics) = (None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"passed" => once(&mut passed, scan.boolean()?)?,
            b"metrics" => once(&mut metrics, std::collections::BTreeMap::deserialize(&mut *scan)?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::VerifierResult { passed: passed.ok_or(Refused)?, metrics: metrics.unwrap_or_default() })
}

/// `LeanRunFinished`: every field required; `outcome` one of [`Outcome`]'s names, `reward` any
/// number (read as serde_json reads it).
fn run_finished(scan: &mut Scan) -> Result<LeanBody> {
    let (mut outcome, mut reward, mut stop_reason, mut reason, mut elapsed_ms) = (None, None, None, None, None);
    scan.open(b'{')?;
    let mut first = true;
    while scan.next_entry(&mut first, b'}')? {
        match scan.plain_key()? {
            b"outcome" => once(&mut outcome, Outcome::deserialize(&mut *scan)?)?,
            b"reward" => once(&mut reward, f64_value(scan)?)?,
            b"stop_reason" => once(&mut stop_reason, name(scan)?)?,
            b"reason" => once(&mut reason, name(scan)?)?,
            b"elapsed_ms" => once(&mut elapsed_ms, scan.unsigned()?)?,
            _ => scan.skip_value()?,
        }
    }
    Ok(LeanBody::RunFinished(LeanRunFinished {
        outcome: outcome.ok_or(Refused)?,
        reward: reward.ok_or(Refused)?,
        stop_reason: stop_reason.ok_or(Refused)?,
        reason: reason.ok_or(Refused)?,
        elapsed_ms: elapsed_ms.ok_or(Refused)?,
    }))
}
