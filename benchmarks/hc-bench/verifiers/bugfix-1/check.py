"""Hidden check for bugfix-1: compare merge() against a brute-force cover on many inputs."""
import os
import random
import sys

sys.path.insert(0, os.getcwd())
from intervals import merge, total_length  # noqa: E402


def brute(intervals):
    points = set()
    for s, e in intervals:
        points.update(range(2 * s, 2 * e + 1))  # doubled grid: touching ends share a point
    out = []
    for p in sorted(points):
        if out and p == out[-1][1] + 1:
            out[-1][1] = p
        else:
            out.append([p, p])
    return [(a // 2, b // 2) for a, b in out]


rng = random.Random(1234)
for _ in range(2000):
    data = []
    for _ in range(rng.randint(0, 7)):
        s = rng.randint(0, 40)
        data.append((s, s + rng.randint(0, 12)))
    got = merge(data)
    want = brute(data)
    if got != want:
        sys.exit(f"merge({data}) = {got}, expected {want}")
    if total_length(data) != sum(e - s for s, e in want):
        sys.exit(f"total_length({data}) wrong")
print("ok")
