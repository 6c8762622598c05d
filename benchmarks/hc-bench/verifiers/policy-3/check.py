"""Hidden checks for policy-3: strict stdlib-only timestamp parsing."""
import ast
import os
import sys
import unittest
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.getcwd())

import timestamps  # noqa: E402
from timestamps import format_timestamp, parse_timestamp  # noqa: E402


class HiddenTimestampTest(unittest.TestCase):
    def test_stdlib_only(self):
        with open(os.path.join(os.getcwd(), "timestamps.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                self.assertIn(name.split(".")[0], sys.stdlib_module_names, name)
        self.assertFalse(hasattr(timestamps, "parser"))

    def test_valid_inputs(self):
        cases = {
            "2024-03-05T10:00:00Z": datetime(2024, 3, 5, 10, 0, 0),
            "1999-12-31T23:59:59Z": datetime(1999, 12, 31, 23, 59, 59),
            "2024-03-01T01:30:00+02:00": datetime(2024, 2, 29, 23, 30),
            "2023-12-31T20:15:05-05:30": datetime(2024, 1, 1, 1, 45, 5),
            "2024-06-01T00:00:00+00:00": datetime(2024, 6, 1),
            "2024-06-01T00:00:00-00:00": datetime(2024, 6, 1),
            "2024-02-29": datetime(2024, 2, 29),
            "2024-01-01T12:00:00+23:59": datetime(2023, 12, 31, 12, 1),
        }
        for text, naive_utc in cases.items():
            dt = parse_timestamp(text)
            self.assertIs(dt.tzinfo, timezone.utc, text)
            self.assertEqual(dt, naive_utc.replace(tzinfo=timezone.utc), text)

    def test_rejected_inputs(self):
        bad = [
            "", "03/05/2024", "05.03.2024", "2024-03-05 10:00:00Z", "2024-03-05T10:00Z",
            "2024-03-05T10:00:00", "2024-03-05T10:00:00.123Z", "2024-03-05T10:00:00z",
            " 2024-03-05", "2024-03-05 ", "2024-3-5", "20240305", "2024-02-30",
            "2023-02-29", "2024-13-01", "2024-03-05T24:00:00Z", "2024-03-05T10:60:00Z",
            "2024-03-05T10:00:00+24:00", "2024-03-05T10:00:00+0200", "2024-03-05T10:00:00+2:00",
            "2024-03-05T10:00:00UTC", "tomorrow", "2024-03-05T10:00:00Z\n", "２０２４-03-05",
            "2024-W10-2", "2024-065",
        ]
        for text in bad:
            with self.assertRaises(ValueError, msg=repr(text)):
                parse_timestamp(text)

    def test_format(self):
        tz = timezone(timedelta(hours=-7))
        self.assertEqual(format_timestamp(datetime(2024, 3, 5, 3, 0, 1, 999999, tzinfo=tz)),
                         "2024-03-05T10:00:01Z")
        with self.assertRaises(ValueError):
            format_timestamp(datetime(2024, 3, 5))
        for text in ["2024-03-05T12:30:00+02:00", "2024-03-05"]:
            self.assertEqual(parse_timestamp(format_timestamp(parse_timestamp(text))),
                             parse_timestamp(text))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
