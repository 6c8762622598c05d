"""Hidden checks for greenfield-5 (unit converter package)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import units  # noqa: E402
from units import UnitError, convert, parse_quantity  # noqa: E402


class HiddenUnitsTest(unittest.TestCase):
    def test_is_package(self):
        self.assertTrue(os.path.isfile(os.path.join(os.getcwd(), "units", "__init__.py")))
        self.assertTrue(hasattr(units, "__path__"))

    def test_unit_error_is_value_error(self):
        self.assertTrue(issubclass(UnitError, ValueError))

    def test_lengths(self):
        cases = [
            (1, "mi", "m", 1609.344),
            (1, "mi", "yd", 1760.0),
            (1, "yd", "in", 36.0),
            (254, "mm", "in", 10.0),
            (1, "m", "cm", 100.0),
            (5, "cm", "mm", 50.0),
            (3, "ft", "yd", 1.0),
            (2.5, "km", "mi", 2.5 * 1000 / 1609.344),
        ]
        for value, src, dst, expected in cases:
            got = convert(value, src, dst)
            self.assertIsInstance(got, float)
            self.assertAlmostEqual(got, expected, places=9, msg=(value, src, dst))

    def test_masses(self):
        cases = [
            (1, "lb", "kg", 0.45359237),
            (16, "oz", "lb", 1.0),
            (1, "kg", "g", 1000.0),
            (1, "g", "mg", 1000.0),
            (1, "kg", "lb", 1 / 0.45359237),
            (500, "mg", "oz", 0.0005 / (0.45359237 / 16)),
        ]
        for value, src, dst, expected in cases:
            self.assertAlmostEqual(convert(value, src, dst), expected, places=9, msg=(value, src, dst))

    def test_temperatures(self):
        cases = [
            (0, "C", "K", 273.15),
            (-40, "C", "F", -40.0),
            (32, "F", "C", 0.0),
            (0, "K", "F", -459.67),
            (300, "K", "C", 26.85),
            (98.6, "F", "K", 310.15),
            (-273.15, "C", "K", 0.0),
        ]
        for value, src, dst, expected in cases:
            self.assertAlmostEqual(convert(value, src, dst), expected, places=6, msg=(value, src, dst))

    def test_below_absolute_zero(self):
        for value, unit in [(-1, "K"), (-273.2, "C"), (-460, "F")]:
            for target in ("K", "C", "F"):
                with self.assertRaises(UnitError, msg=(value, unit, target)):
                    convert(value, unit, target)

    def test_identity(self):
        self.assertEqual(convert(7, "m", "m"), 7.0)
        self.assertIsInstance(convert(7, "m", "m"), float)
        self.assertEqual(convert(-3, "C", "C"), -3.0)

    def test_unknown_and_case_sensitive(self):
        for src, dst in [("KM", "m"), ("m", "Kg"), ("c", "F"), ("meter", "m"), ("", "m"), ("m", "k")]:
            with self.assertRaises(UnitError, msg=(src, dst)):
                convert(1, src, dst)

    def test_incompatible_message(self):
        pairs = [("km", "kg", "length", "mass"), ("lb", "C", "mass", "temperature"),
                 ("K", "in", "temperature", "length")]
        for src, dst, d1, d2 in pairs:
            with self.assertRaises(UnitError) as ctx:
                convert(1, src, dst)
            message = str(ctx.exception)
            self.assertIn(d1, message)
            self.assertIn(d2, message)

    def test_parse_quantity(self):
        cases = {
            "5 km": (5.0, "km"),
            "12.5kg": (12.5, "kg"),
            "-40 F": (-40.0, "F"),
            " 3e2  mm ": (300.0, "mm"),
            "+.5 oz": (0.5, "oz"),
            "1E-3\tm": (0.001, "m"),
            "0 K": (0.0, "K"),
        }
        for text, expected in cases.items():
            value, unit = parse_quantity(text)
            self.assertIsInstance(value, float)
            self.assertAlmostEqual(value, expected[0], msg=text)
            self.assertEqual(unit, expected[1], msg=text)

    def test_parse_quantity_errors(self):
        for text in ["", "km", "5", "5 parsecs", "five km", "5 k m", "5 KM", "1.2.3 m", "5 m extra", "--5 m"]:
            with self.assertRaises(UnitError, msg=repr(text)):
                parse_quantity(text)

    def test_round_trip(self):
        for src, dst in [("mi", "km"), ("oz", "g"), ("F", "C"), ("in", "mm")]:
            self.assertAlmostEqual(convert(convert(42.0, src, dst), dst, src), 42.0, places=9)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
