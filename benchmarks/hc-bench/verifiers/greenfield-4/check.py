"""Hidden checks for greenfield-4 (cron expression matcher)."""
import os
import sys
import unittest
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.getcwd())

import cronmatch  # noqa: E402


class HiddenCronTest(unittest.TestCase):
    def test_cron_error_is_value_error(self):
        self.assertTrue(issubclass(cronmatch.CronError, ValueError))

    def test_parse_star(self):
        minute, hour, dom, month, dow = cronmatch.parse("* * * * *")
        self.assertEqual(set(minute), set(range(60)))
        self.assertEqual(set(hour), set(range(24)))
        self.assertEqual(set(dom), set(range(1, 32)))
        self.assertEqual(set(month), set(range(1, 13)))
        self.assertEqual(set(dow), set(range(7)))

    def test_parse_steps_ranges_lists(self):
        minute, hour, dom, month, dow = cronmatch.parse("*/15 1-10/4 5/10 1,6-7 0,7")
        self.assertEqual(set(minute), {0, 15, 30, 45})
        self.assertEqual(set(hour), {1, 5, 9})
        self.assertEqual(set(dom), {5, 15, 25})
        self.assertEqual(set(month), {1, 6, 7})
        self.assertEqual(set(dow), {0})

    def test_step_start_value(self):
        self.assertEqual(set(cronmatch.parse("5/20 * * * *")[0]), {5, 25, 45})
        self.assertEqual(set(cronmatch.parse("* */5 * * *")[1]), {0, 5, 10, 15, 20})
        self.assertEqual(set(cronmatch.parse("* * */10 * *")[2]), {1, 11, 21, 31})
        self.assertEqual(set(cronmatch.parse("* * * */5 *")[3]), {1, 6, 11})

    def test_names(self):
        _, _, _, month, dow = cronmatch.parse("0 0 * JAN,jun-Aug MON-fri")
        self.assertEqual(set(month), {1, 6, 7, 8})
        self.assertEqual(set(dow), {1, 2, 3, 4, 5})
        self.assertEqual(set(cronmatch.parse("0 0 * * sun")[4]), {0})
        self.assertEqual(set(cronmatch.parse("0 0 * * 5-7")[4]), {0, 5, 6})

    def test_whitespace(self):
        self.assertEqual(cronmatch.parse("  0\t12  *   * *  ")[1], frozenset({12}))

    def test_returns_frozensets(self):
        parsed = cronmatch.parse("1 2 3 4 5")
        self.assertIsInstance(parsed, tuple)
        self.assertEqual(len(parsed), 5)
        for field in parsed:
            self.assertIsInstance(field, frozenset)

    def test_invalid_expressions(self):
        bad = [
            "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
            "* * 32 * *", "* * * 13 *", "* * * 0 *", "* * * * 8", "-1 * * * *",
            "5-1 * * * *", "*/0 * * * *", "1,,2 * * * *", ", * * * *", "a * * * *",
            "* * * foo *", "* * * * mon-xyz", "*/ * * * *", "1- * * * *", "1/-2 * * * *",
            "** * * * *", "1-2-3 * * * *", "* * * * monday",
        ]
        for expr in bad:
            with self.assertRaises(cronmatch.CronError, msg=repr(expr)):
                cronmatch.parse(expr)
            with self.assertRaises(cronmatch.CronError, msg=repr(expr)):
                cronmatch.matches(expr, datetime(2024, 1, 1))

    def test_sunday_mapping(self):
        sunday = datetime(2024, 5, 19, 0, 0)
        monday = datetime(2024, 5, 20, 0, 0)
        for expr in ("0 0 * * 0", "0 0 * * 7", "0 0 * * SUN"):
            self.assertTrue(cronmatch.matches(expr, sunday), expr)
            self.assertFalse(cronmatch.matches(expr, monday), expr)

    def test_dom_or_dow_when_both_restricted(self):
        expr = "0 0 13 * 5"  # the 13th, or any Friday
        self.assertTrue(cronmatch.matches(expr, datetime(2024, 9, 13)))   # Friday 13th
        self.assertTrue(cronmatch.matches(expr, datetime(2024, 9, 20)))   # Friday
        self.assertTrue(cronmatch.matches(expr, datetime(2024, 8, 13)))   # Tuesday 13th
        self.assertFalse(cronmatch.matches(expr, datetime(2024, 8, 14)))  # Wednesday 14th

    def test_dom_and_dow_when_one_is_star(self):
        self.assertFalse(cronmatch.matches("0 0 13 * *", datetime(2024, 9, 20)))
        self.assertTrue(cronmatch.matches("0 0 * * 5", datetime(2024, 9, 20)))
        self.assertFalse(cronmatch.matches("0 0 * * 5", datetime(2024, 8, 13)))
        # a stepped star is still unrestricted-looking "*" at the start: both must match
        self.assertFalse(cronmatch.matches("0 0 */2 * 5", datetime(2024, 9, 20)))
        self.assertTrue(cronmatch.matches("0 0 */2 * 5", datetime(2024, 9, 13)))

    def test_ignores_seconds_and_tz(self):
        when = datetime(2024, 3, 1, 6, 30, 59, 999999, tzinfo=timezone(timedelta(hours=5)))
        self.assertTrue(cronmatch.matches("30 6 1 3 *", when))

    def test_exhaustive_week(self):
        expr = "*/30 9-17 * * mon-fri"
        start = datetime(2024, 5, 13)  # Monday
        hits = 0
        for i in range(7 * 24 * 60):
            if cronmatch.matches(expr, start + timedelta(minutes=i)):
                hits += 1
        self.assertEqual(hits, 5 * 9 * 2)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
