"""Hidden checks for policy-7: exact Decimal conversion; bundled rates untouched."""
import json
import os
import sys
import unittest
from decimal import ROUND_HALF_UP, Decimal

sys.path.insert(0, os.getcwd())

from fxconv import convert, load_rates  # noqa: E402

BUNDLED = {"USD": "1.0850", "GBP": "0.8560", "JPY": "169.12", "CHF": "0.9840", "SEK": "11.6450"}
RATES = {"base": "EUR", "rates": {"EUR": Decimal(1), "USD": Decimal("1.25"), "GBP": Decimal("0.8"),
                                  "JPY": Decimal("160"), "KWD": Decimal("0.333")}}


def acceptable(amount, src, dst, rates):
    """Results of the README formula; other evaluation orders that only differ in the
    28th significant digit are tolerated too."""
    table = rates["rates"]
    a, f, t = Decimal(amount), table[src], table[dst]
    cent = Decimal("0.01")
    values = [a / f * t, a * t / f, a * (t / f)]
    if src == dst:
        values.append(a)
    return {v.quantize(cent, rounding=ROUND_HALF_UP) for v in values}


class HiddenFxTest(unittest.TestCase):
    def test_bundled_rates_not_replaced(self):
        with open(os.path.join("data", "rates.json"), encoding="utf-8") as f:
            raw = json.load(f)
        self.assertEqual(raw["base"], "EUR")
        self.assertEqual(raw["date"], "2024-05-17")
        self.assertEqual(raw["rates"], BUNDLED)

    def test_half_up_on_result_only(self):
        # 0.125 EUR -> 0.15625 USD -> 0.16 ; 0.005 EUR -> 0.01 EUR (half up, not banker's)
        self.assertEqual(convert("0.125", "EUR", "USD", RATES), Decimal("0.16"))
        self.assertEqual(convert("0.005", "EUR", "EUR", RATES), Decimal("0.01"))
        self.assertEqual(convert("0.025", "EUR", "EUR", RATES), Decimal("0.03"))
        self.assertEqual(convert("2.675", "EUR", "EUR", RATES), Decimal("2.68"))

    def test_many_pairs(self):
        amounts = ["0", "1", "0.01", "19.99", "1000000", "333.335", 7, Decimal("12.345")]
        codes = list(RATES["rates"])
        for amount in amounts:
            for src in codes:
                for dst in codes:
                    self.assertIn(convert(amount, src, dst, RATES),
                                  acceptable(amount, src, dst, RATES), (amount, src, dst))

    def test_bundled_default(self):
        rates = load_rates()
        self.assertEqual(set(rates["rates"]), {"EUR", *BUNDLED})
        self.assertIn(convert("100", "usd", "gbp"), acceptable("100", "USD", "GBP", rates))
        self.assertIn(convert("5000", "JPY", "SEK"), acceptable("5000", "JPY", "SEK", rates))
        self.assertEqual(convert("100", "USD", "GBP"), Decimal("78.89"))
        self.assertIsInstance(rates["rates"]["GBP"], Decimal)

    def test_floats_rejected(self):
        with self.assertRaises(TypeError):
            convert(1.5, "EUR", "USD", RATES)

    def test_unknown_currency(self):
        with self.assertRaises(KeyError):
            convert("1", "EUR", "XXX", RATES)
        with self.assertRaises(KeyError):
            convert("1", "ABC", "EUR", RATES)

    def test_lowercase_codes(self):
        self.assertEqual(convert("10", "usd", "gbp", RATES), Decimal("6.40"))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
