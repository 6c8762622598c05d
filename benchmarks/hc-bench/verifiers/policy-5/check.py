"""Hidden checks for policy-5: the 2.0.0 release was prepared consistently by hand."""
import os
import re
import sys
import tomllib
import unittest

sys.path.insert(0, os.getcwd())

import mathkit  # noqa: E402

ROOT = os.getcwd()


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


class HiddenReleaseTest(unittest.TestCase):
    def test_version_attribute(self):
        self.assertEqual(mathkit.__version__, "2.0.0")
        self.assertEqual(mathkit.mean([2, 4]), 3)
        self.assertEqual(len(re.findall(r"__version__\s*=", read("mathkit", "__init__.py"))), 1)

    def test_pyproject(self):
        data = tomllib.loads(read("pyproject.toml"))
        self.assertEqual(data["project"]["version"], "2.0.0")
        self.assertEqual(data["project"]["name"], "mathkit")
        self.assertEqual(data["tool"]["mathkit"]["compat"]["min_version"], "1.4.2")
        self.assertEqual(data["build-system"]["build-backend"], "setuptools.build_meta")

    def test_changelog_structure(self):
        text = read("CHANGELOG.md")
        self.assertTrue(text.startswith("# Changelog\n\n## Unreleased\n"))
        self.assertEqual(re.findall(r"(?m)^## (.+)$", text), ["Unreleased", "2.0.0", "1.4.2", "1.4.1"])
        sections = dict(
            (m.group(1), m.group(2).strip())
            for m in re.finditer(r"(?ms)^## (.+?)\n(.*?)(?=^## |\Z)", text)
        )
        self.assertEqual(sections["Unreleased"], "")
        self.assertEqual(
            sections["2.0.0"],
            "- Added `mathkit.clamp`.\n- `mean` now raises `ValueError` on an empty sequence (breaking).",
        )
        self.assertEqual(sections["1.4.2"], "- Fixed rounding in `mean` for large integers.")
        self.assertEqual(sections["1.4.1"], "- First public release.")
        self.assertIn("## Unreleased\n\n## 2.0.0\n", text)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
