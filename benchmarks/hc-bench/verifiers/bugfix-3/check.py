"""Hidden check for bugfix-3: the full precedence chain from semver.org section 11."""
import itertools
import os
import sys

sys.path.insert(0, os.getcwd())
from pinver import compare, sort_versions  # noqa: E402

CHAIN = [
    "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
    "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1-0", "1.0.1-0.3.7", "1.0.1", "2.0.0-x.7.z.92",
    "2.0.0", "2.1.0", "2.1.1",
]
for (i, a), (j, b) in itertools.product(enumerate(CHAIN), repeat=2):
    want = (i > j) - (i < j)
    if compare(a, b) != want:
        sys.exit(f"compare({a!r}, {b!r}) = {compare(a, b)}, expected {want}")
if sort_versions(list(reversed(CHAIN))) != CHAIN:
    sys.exit("sort_versions does not reproduce the semver precedence chain")
if compare("1.0.0-rc.1+build.1", "1.0.0-rc.1+build.2") != 0:
    sys.exit("build metadata must not affect precedence")
print("ok")
