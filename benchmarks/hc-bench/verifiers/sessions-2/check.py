"""Hidden per-feature checks: `check.py FEATURE` exits 0 when that feature works."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

import json
import tempfile

from kvstore import Store


class SetGet(unittest.TestCase):
    def test_basics(self):
        s = Store()
        self.assertEqual(len(s), 0)
        s.set("a", 1)
        s.set("a", 2)
        s.set("b", None)
        self.assertEqual((s.get("a"), s.get("b", 5), s.get("zz")), (2, None, None))
        self.assertEqual(len(s), 2)
        with self.assertRaises(TypeError):
            s.set(3, "x")

    def test_stores_are_separate(self):
        a, b = Store(), Store()
        a.set("k", 1)
        self.assertIsNone(b.get("k"))


class Delete(unittest.TestCase):
    def test_delete(self):
        s = Store()
        s.set("a", 1)
        s.set("b", 2)
        self.assertEqual(s.delete("b"), 2)
        self.assertEqual(len(s), 1)
        with self.assertRaises(KeyError):
            s.delete("b")


class Persist(unittest.TestCase):
    def test_json_file(self):
        s = Store()
        s.set("x", {"y": [1, "2"]})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            s.save(path)
            with open(path) as f:
                self.assertEqual(json.load(f), {"x": {"y": [1, "2"]}})
            t = Store.load(path)
            self.assertIsInstance(t, Store)
            self.assertEqual((t.get("x"), len(t)), ({"y": [1, "2"]}, 1))


CHECKS = {"set-get": SetGet, "delete": Delete, "persist": Persist}

if __name__ == "__main__":
    feature = sys.argv[1]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CHECKS[feature])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
