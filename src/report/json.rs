//! `report.json`: the whole report model (cells, stats, comparisons) for machines.
//!
//! Laid out for both readers: the top level and the members of its arrays and objects each on
//! a line of their own, indented as `to_writer_pretty` would, and everything deeper written
//! compactly on that line. So each cell, group statistic and comparison is one line, as in
//! results.jsonl, and the file is about a third smaller than fully indented JSON (a cell's
//! summary at four levels of indentation was mostly spaces). Parsers see the same value.

use std::io::{self, Write};

use serde_json::ser::Formatter;

use super::model::MatrixReport;
use super::{ExportError, Exporter};

pub struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn write(&self, report: &MatrixReport, out: &mut dyn Write) -> Result<(), ExportError> {
        let mut ser = serde_json::Serializer::with_formatter(&mut *out, Outline::default());
        serde::Serialize::serialize(report, &mut ser).map_err(|e| match e.io_error_kind() {
            Some(_) => ExportError::Stream(e.into()),
            None => ExportError::Render { format: "json", message: e.to_string() },
        })?;
        out.write_all(b"\n")?;
        Ok(())
    }
}

/// Containers opened at this depth or above (the top level is 1) put each member on a line of
/// its own; deeper ones are written on their parent's line.
const LINED_DEPTH: usize = 2;

/// The JSON layout described at the top of this file.
#[derive(Default)]
struct Outline {
    /// Containers open at this point.
    depth: usize,
    /// Whether the innermost container written to has had a member.
    has_value: bool,
}

impl Outline {
    fn lined(&self) -> bool {
        self.depth <= LINED_DEPTH
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        let lined = self.lined();
        self.depth -= 1;
        if lined && self.has_value {
            self.new_line(w)?;
        }
        self.has_value = true;
        w.write_all(bracket)
    }

    /// Before a member: the comma, and in a lined container its line.
    fn member<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        if self.lined() {
            self.new_line(w)?;
        }
        Ok(())
    }

    fn new_line<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(b"\n")?;
        (0..self.depth).try_for_each(|_| w.write_all(b"  "))
    }
}

impl Formatter for Outline {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.member(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.member(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(if self.lined() { b": " } else { b":" })
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outlined(v: &serde_json::Value) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Outline::default());
        serde::Serialize::serialize(v, &mut ser).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn members_of_the_top_two_levels_have_lines_and_deeper_values_are_compact() {
        // (serde_json's maps keep their keys sorted.)
        let v = serde_json::json!({
            "run_id": "r",
            "cells": [{"cell_id": "a", "tool_counts": {"read_file": 2}, "files": ["x", "y"]}, {"cell_id": "b"}],
            "empty": [],
            "none": {},
            "stats": {"oracle": {"n": 2}},
        });
        let text = outlined(&v);
        assert_eq!(
            text,
            concat!(
                "{\n",
                "  \"cells\": [\n",
                "    {\"cell_id\":\"a\",\"files\":[\"x\",\"y\"],\"tool_counts\":{\"read_file\":2}},\n",
                "    {\"cell_id\":\"b\"}\n",
                "  ],\n",
                "  \"empty\": [],\n",
                "  \"none\": {},\n",
                "  \"run_id\": \"r\",\n",
                "  \"stats\": {\n",
                "    \"oracle\": {\"n\":2}\n",
                "  }\n",
                "}"
            )
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v, "the layout changes no value");
    }

    #[test]
    fn a_scalar_or_a_top_level_array_is_laid_out_the_same_way() {
        assert_eq!(outlined(&serde_json::json!(3)), "3");
        assert_eq!(outlined(&serde_json::json!([[1, [2]], []])), "[\n  [\n    1,\n    [2]\n  ],\n  []\n]");
    }
}
