"""Hidden checks for greenfield-3 (text table formatter)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

from texttable import format_table  # noqa: E402


class HiddenTextTableTest(unittest.TestCase):
    def test_center_alignment(self):
        out = format_table(["abcdef", "x"], [["ab", "y"], ["abc", "zz"]], align="cc")
        self.assertEqual(
            out,
            "| abcdef | x  |\n"
            "|:------:|:--:|\n"
            "|   ab   | y  |\n"
            "|  abc   | zz |",
        )

    def test_all_alignments(self):
        out = format_table(["l", "r", "c"], [["a", "b", "c"], ["long", "long", "long"]], align="lrc")
        self.assertEqual(
            out,
            "| l    |    r |  c   |\n"
            "|------|-----:|:----:|\n"
            "| a    |    b |  c   |\n"
            "| long | long | long |",
        )

    def test_no_rows(self):
        self.assertEqual(format_table(["h"], []), "| h |\n|---|")

    def test_none_and_values(self):
        out = format_table(["a", "b"], [[None, 1.5], [True, None]])
        self.assertEqual(
            out,
            "| a    | b   |\n"
            "|------|-----|\n"
            "|      | 1.5 |\n"
            "| True |     |",
        )

    def test_min_width_one(self):
        out = format_table([""], [[None]], align="r")
        self.assertEqual(out, "|   |\n|--:|\n|   |")

    def test_pipe_escaping_and_newlines(self):
        out = format_table(["a|b"], [["x\ny"], ["p\r\nq"], ["r\rs"]])
        self.assertEqual(
            out,
            "| a\\|b |\n"
            "|------|\n"
            "| x y  |\n"
            "| p q  |\n"
            "| r s  |",
        )

    def test_no_trailing_newline(self):
        self.assertFalse(format_table(["a"], [["b"]]).endswith("\n"))

    def test_tuples_and_generators_accepted(self):
        out = format_table(("k", "v"), ((1, 2), (3, 4)))
        self.assertEqual(out, "| k | v |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |")

    def test_errors(self):
        with self.assertRaises(ValueError):
            format_table(["a", "b"], [[1]])
        with self.assertRaises(ValueError):
            format_table(["a"], [[1, 2]])
        with self.assertRaises(ValueError):
            format_table([], [])
        with self.assertRaises(ValueError):
            format_table(["a", "b"], [], align="l")
        with self.assertRaises(ValueError):
            format_table(["a", "b"], [], align="lx")
        with self.assertRaises(ValueError):
            format_table(["a"], [], align="L")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
