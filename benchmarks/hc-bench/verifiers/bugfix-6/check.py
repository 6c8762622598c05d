"""Hidden check for bugfix-6: every numeral from 1 to 3999 round-trips."""
import os
import sys

sys.path.insert(0, os.getcwd())
from numerals import from_roman, to_roman  # noqa: E402

for number in range(1, 4000):
    numeral = to_roman(number)
    if from_roman(numeral) != number or from_roman(numeral.lower()) != number:
        sys.exit(f"from_roman({numeral!r}) = {from_roman(numeral)}, expected {number}")
for bad in ("IIII", "VV", "XM", "IL", "MMMM", "CCCC", "LL", "DM"):
    try:
        from_roman(bad)
    except ValueError:
        continue
    sys.exit(f"from_roman({bad!r}) should raise ValueError")
print("ok")
