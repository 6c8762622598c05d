"""Hidden per-feature checks: `check.py FEATURE` exits 0 when that feature works."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import units


class Length(unittest.TestCase):
    def test_conversions(self):
        self.assertAlmostEqual(units.convert_length(25, "mm", "cm"), 2.5)
        self.assertAlmostEqual(units.convert_length(3, "m", "km"), 0.003)
        self.assertAlmostEqual(units.convert_length(7, "cm", "cm"), 7)
        with self.assertRaises(ValueError):
            units.convert_length(1, "mile", "m")


class Temperature(unittest.TestCase):
    def test_conversions(self):
        self.assertAlmostEqual(units.convert_temp(32, "F", "C"), 0.0)
        self.assertAlmostEqual(units.convert_temp(0, "C", "K"), 273.15)
        self.assertAlmostEqual(units.convert_temp(0, "K", "F"), -459.67)
        with self.assertRaises(ValueError):
            units.convert_temp(-300, "C", "K")
        with self.assertRaises(ValueError):
            units.convert_temp(1, "R", "C")


class Parse(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(units.parse_quantity(" -2 C "), (-2.0, "C"))
        self.assertEqual(units.parse_quantity("10 mm"), (10.0, "mm"))
        for bad in ("", "km", "3.5", "x km", "1 2 m"):
            with self.assertRaises(ValueError, msg=bad):
                units.parse_quantity(bad)


CHECKS = {"length": Length, "temperature": Temperature, "parse": Parse}

if __name__ == "__main__":
    feature = sys.argv[1]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CHECKS[feature])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
