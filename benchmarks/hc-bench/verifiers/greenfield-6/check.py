"""Hidden checks for greenfield-6 (trie with prefix search)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

from wordtrie import Trie  # noqa: E402

WORDS = ["tea", "ten", "ted", "to", "tone", "in", "inn", "i", "Tea", "zoë", "zoo"]


class HiddenTrieTest(unittest.TestCase):
    def test_iteration_sorted(self):
        trie = Trie(WORDS)
        self.assertEqual(list(trie), sorted(WORDS))
        self.assertEqual(len(trie), len(WORDS))

    def test_prefix_queries(self):
        trie = Trie(WORDS)
        self.assertTrue(trie.has_prefix("te"))
        self.assertTrue(trie.has_prefix("tone"))
        self.assertFalse(trie.has_prefix("tones"))
        self.assertFalse(trie.has_prefix("TE"))
        self.assertTrue(trie.has_prefix(""))
        self.assertEqual(trie.count_prefix("t"), 5)
        self.assertEqual(trie.count_prefix("in"), 2)
        self.assertEqual(trie.count_prefix("i"), 3)
        self.assertEqual(trie.count_prefix(""), len(WORDS))
        self.assertEqual(trie.count_prefix("q"), 0)
        self.assertEqual(trie.complete("zo"), ["zoo", "zoë"])
        self.assertEqual(trie.complete("t", limit=2), ["tea", "ted"])
        self.assertEqual(trie.complete("t", limit=0), [])
        self.assertEqual(trie.complete("t", limit=99), ["tea", "ted", "ten", "to", "tone"])
        self.assertEqual(trie.complete(""), sorted(WORDS))
        with self.assertRaises(ValueError):
            trie.complete("t", limit=-1)

    def test_remove_prunes(self):
        trie = Trie(["apple", "app", "apply"])
        self.assertTrue(trie.remove("apple"))
        self.assertFalse(trie.remove("apple"))
        self.assertFalse(trie.remove("ap"))
        self.assertNotIn("apple", trie)
        self.assertIn("app", trie)
        self.assertFalse(trie.has_prefix("appl" + "e"))
        self.assertTrue(trie.has_prefix("appl"))
        self.assertTrue(trie.remove("apply"))
        self.assertFalse(trie.has_prefix("appl"))
        self.assertTrue(trie.has_prefix("app"))
        self.assertEqual(len(trie), 1)
        self.assertTrue(trie.remove("app"))
        self.assertEqual(len(trie), 0)
        self.assertFalse(trie.has_prefix(""))
        self.assertFalse(trie.has_prefix("a"))
        self.assertEqual(list(trie), [])

    def test_remove_prefix_word_keeps_longer(self):
        trie = Trie(["app", "apple"])
        self.assertTrue(trie.remove("app"))
        self.assertNotIn("app", trie)
        self.assertIn("apple", trie)
        self.assertTrue(trie.has_prefix("app"))
        self.assertEqual(trie.count_prefix("app"), 1)

    def test_reinsert_after_remove(self):
        trie = Trie(["x"])
        trie.remove("x")
        self.assertTrue(trie.insert("x"))
        self.assertEqual(len(trie), 1)

    def test_longest_common_prefix(self):
        self.assertEqual(Trie().longest_common_prefix(), "")
        self.assertEqual(Trie(["flower", "flow", "flight"]).longest_common_prefix(), "fl")
        self.assertEqual(Trie(["interview", "internet", "interval"]).longest_common_prefix(), "inter")
        self.assertEqual(Trie(["solo"]).longest_common_prefix(), "solo")
        self.assertEqual(Trie(["ab", "abc"]).longest_common_prefix(), "ab")
        self.assertEqual(Trie(["a", "b"]).longest_common_prefix(), "")
        trie = Trie(["abc", "abd", "x"])
        trie.remove("x")
        self.assertEqual(trie.longest_common_prefix(), "ab")

    def test_empty_and_type_errors(self):
        trie = Trie(["a"])
        with self.assertRaises(ValueError):
            trie.insert("")
        self.assertNotIn("", trie)
        self.assertFalse(trie.remove(""))
        for bad in (None, 3, b"a", ["a"]):
            with self.assertRaises(TypeError, msg=repr(bad)):
                trie.insert(bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                bad in trie  # noqa: B015
            with self.assertRaises(TypeError, msg=repr(bad)):
                trie.remove(bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                trie.has_prefix(bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                trie.complete(bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                trie.count_prefix(bad)
        self.assertEqual(len(trie), 1)

    def test_constructor_accepts_generator(self):
        trie = Trie(w for w in ["b", "a", "b"])
        self.assertEqual(list(trie), ["a", "b"])

    def test_many_words(self):
        words = [f"w{i:05d}" for i in range(3000)]
        trie = Trie(words)
        self.assertEqual(len(trie), 3000)
        self.assertEqual(trie.count_prefix("w01"), 1000)
        self.assertEqual(trie.complete("w0299"), [f"w0299{i}" for i in range(10)])
        for w in words[::2]:
            trie.remove(w)
        self.assertEqual(len(trie), 1500)
        self.assertEqual(trie.count_prefix("w00"), 500)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
