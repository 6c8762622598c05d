"""Hidden checks for greenfield-1 (token bucket)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

from ratelimit import TokenBucket  # noqa: E402


class FakeClock:
    def __init__(self, now=0.0):
        self.now = now
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.now


class HiddenTokenBucketTest(unittest.TestCase):
    def test_invalid_construction(self):
        for cap, rate in [(0, 1.0), (-1, 1.0), (3, 0), (3, -2.0)]:
            with self.assertRaises(ValueError, msg=(cap, rate)):
                TokenBucket(capacity=cap, refill_rate=rate, clock=FakeClock())

    def test_starts_full(self):
        bucket = TokenBucket(capacity=5, refill_rate=1.0, clock=FakeClock())
        self.assertAlmostEqual(bucket.available(), 5.0)

    def test_uses_injected_clock(self):
        clock = FakeClock(100.0)
        bucket = TokenBucket(capacity=4, refill_rate=2.0, clock=clock)
        bucket.try_acquire(4)
        clock.now = 101.0
        self.assertAlmostEqual(bucket.available(), 2.0)
        self.assertGreater(clock.calls, 0)

    def test_fractional_refill(self):
        clock = FakeClock()
        bucket = TokenBucket(capacity=10, refill_rate=1.0, clock=clock)
        self.assertTrue(bucket.try_acquire(10))
        clock.now = 0.5
        self.assertAlmostEqual(bucket.available(), 0.5)
        self.assertFalse(bucket.try_acquire())
        clock.now = 1.0
        self.assertTrue(bucket.try_acquire())
        self.assertAlmostEqual(bucket.available(), 0.0)

    def test_refill_capped_at_capacity(self):
        clock = FakeClock()
        bucket = TokenBucket(capacity=3, refill_rate=5.0, clock=clock)
        bucket.try_acquire(1)
        clock.now = 1000.0
        self.assertAlmostEqual(bucket.available(), 3.0)

    def test_failed_acquire_consumes_nothing(self):
        clock = FakeClock()
        bucket = TokenBucket(capacity=5, refill_rate=1.0, clock=clock)
        bucket.try_acquire(3)
        self.assertFalse(bucket.try_acquire(3))
        self.assertAlmostEqual(bucket.available(), 2.0)
        self.assertTrue(bucket.try_acquire(2))

    def test_invalid_n(self):
        bucket = TokenBucket(capacity=3, refill_rate=1.0, clock=FakeClock())
        for n in (0, -1, 4):
            with self.assertRaises(ValueError, msg=n):
                bucket.try_acquire(n)
            with self.assertRaises(ValueError, msg=n):
                bucket.wait_time(n)

    def test_wait_time(self):
        clock = FakeClock()
        bucket = TokenBucket(capacity=4, refill_rate=2.0, clock=clock)
        self.assertEqual(bucket.wait_time(4), 0.0)
        bucket.try_acquire(4)
        self.assertAlmostEqual(bucket.wait_time(1), 0.5)
        self.assertAlmostEqual(bucket.wait_time(3), 1.5)
        # wait_time never consumes
        self.assertAlmostEqual(bucket.available(), 0.0)
        clock.now = 0.25
        self.assertAlmostEqual(bucket.wait_time(1), 0.25)
        clock.now = 0.5
        self.assertEqual(bucket.wait_time(1), 0.0)
        self.assertTrue(bucket.try_acquire(1))

    def test_clock_going_backwards(self):
        clock = FakeClock(10.0)
        bucket = TokenBucket(capacity=4, refill_rate=1.0, clock=clock)
        bucket.try_acquire(4)
        clock.now = 5.0
        self.assertAlmostEqual(bucket.available(), 0.0)
        clock.now = 7.0
        self.assertAlmostEqual(bucket.available(), 2.0)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
