"""Hidden per-feature checks: `check.py FEATURE` exits 0 when that feature works."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import textstats


class WordCount(unittest.TestCase):
    def test_words(self):
        self.assertEqual(textstats.count_words("Don't stop, 2 go!"), 4)
        self.assertEqual(textstats.count_words(""), 0)
        self.assertEqual(textstats.count_words("one\ntwo\tthree"), 3)


class TopWords(unittest.TestCase):
    def test_ranking(self):
        text = "b a B c a C d"
        self.assertEqual(textstats.top_words(text, 3), [("a", 2), ("b", 2), ("c", 2)])
        self.assertEqual(textstats.top_words("x", 5), [("x", 1)])

    def test_bad_n(self):
        for n in (0, -1, 1.5, "2"):
            with self.assertRaises(ValueError):
                textstats.top_words("a", n)


class CharCount(unittest.TestCase):
    def test_chars(self):
        self.assertEqual(textstats.count_chars(""), 0)
        self.assertEqual(textstats.count_chars("a b\tc\n", spaces=False), 3)
        self.assertEqual(textstats.count_chars("a b\tc\n"), 6)


CHECKS = {"word-count": WordCount, "top-words": TopWords, "char-count": CharCount}

if __name__ == "__main__":
    feature = sys.argv[1]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CHECKS[feature])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
