"""Hidden checks for greenfield-8 (event bus)."""
import os
import sys
import unittest

sys.path.insert(0, os.getcwd())

from notifier import EventBus, PublishError, describe  # noqa: E402
from notifier import bus as bus_module  # noqa: E402


class HiddenEventBusTest(unittest.TestCase):
    def test_module_layout(self):
        self.assertIs(bus_module.EventBus, EventBus)
        self.assertIs(bus_module.PublishError, PublishError)
        self.assertTrue(issubclass(PublishError, Exception))
        self.assertEqual(describe("x"), "x()")

    def test_kwargs_and_no_subscribers(self):
        bus = EventBus()
        seen = []
        bus.subscribe("e", lambda *a, **k: seen.append((a, k)))
        self.assertEqual(bus.publish("e", 1, 2, key="v"), 1)
        self.assertEqual(seen, [((1, 2), {"key": "v"})])
        self.assertEqual(bus.publish("other"), 0)

    def test_priority_order(self):
        bus = EventBus()
        order = []
        bus.subscribe("e", lambda: order.append("low"), priority=-5)
        bus.subscribe("e", lambda: order.append("first0"))
        bus.subscribe("e", lambda: order.append("high"), priority=10)
        bus.subscribe("e", lambda: order.append("second0"), priority=0)
        bus.publish("e")
        self.assertEqual(order, ["high", "first0", "second0", "low"])

    def test_wildcard(self):
        bus = EventBus()
        order = []
        bus.subscribe("*", lambda ev, *a, **k: order.append(("wild", ev, a, k)))
        bus.subscribe("e", lambda *a, **k: order.append(("e", a, k)))
        bus.subscribe("*", lambda ev, *a, **k: order.append(("wild-high", ev)), priority=1)
        self.assertEqual(bus.publish("e", 5, x=1), 3)
        self.assertEqual(order, [("wild-high", "e"), ("wild", "e", (5,), {"x": 1}), ("e", (5,), {"x": 1})])
        order.clear()
        self.assertEqual(bus.publish("other"), 2)
        self.assertEqual(order, [("wild-high", "other"), ("wild", "other", (), {})])
        self.assertEqual(bus.handler_count("*"), 2)
        self.assertEqual(bus.handler_count("e"), 1)
        self.assertEqual(bus.handler_count("nothing"), 0)

    def test_duplicate_registrations(self):
        bus = EventBus()
        seen = []
        unsub1 = bus.subscribe("e", seen.append)
        bus.subscribe("e", seen.append)
        self.assertEqual(bus.publish("e", "x"), 2)
        unsub1()
        unsub1()
        self.assertEqual(bus.handler_count("e"), 1)
        self.assertEqual(bus.publish("e", "y"), 1)
        self.assertEqual(seen, ["x", "x", "y"])

    def test_once(self):
        bus = EventBus()
        seen = []
        bus.once("e", seen.append)
        self.assertEqual(bus.handler_count("e"), 1)
        self.assertEqual(bus.publish("e", 1), 1)
        self.assertEqual(bus.publish("e", 2), 0)
        self.assertEqual(seen, [1])
        unsub = bus.once("e", seen.append)
        unsub()
        self.assertEqual(bus.publish("e", 3), 0)
        self.assertEqual(seen, [1])

    def test_once_reentrant_publish(self):
        bus = EventBus()
        seen = []

        def handler(n):
            seen.append(n)
            if n < 3:
                bus.publish("e", n + 1)

        bus.once("e", handler)
        bus.publish("e", 1)
        self.assertEqual(seen, [1])

    def test_subscribe_during_publish_waits(self):
        bus = EventBus()
        seen = []

        def adder():
            seen.append("adder")
            bus.subscribe("e", lambda: seen.append("late"))

        bus.subscribe("e", adder)
        self.assertEqual(bus.publish("e"), 1)
        self.assertEqual(seen, ["adder"])
        self.assertEqual(bus.publish("e"), 2)

    def test_unsubscribe_during_publish_skips(self):
        bus = EventBus()
        seen = []
        holder = {}

        def killer():
            seen.append("killer")
            holder["unsub"]()

        bus.subscribe("e", killer, priority=1)
        holder["unsub"] = bus.subscribe("e", lambda: seen.append("victim"))
        self.assertEqual(bus.publish("e"), 1)
        self.assertEqual(seen, ["killer"])

    def test_errors_collected(self):
        bus = EventBus()
        seen = []
        boom1 = RuntimeError("one")
        boom2 = KeyError("two")

        def fail1():
            raise boom1

        def fail2():
            raise boom2

        bus.subscribe("e", fail1, priority=2)
        bus.subscribe("e", lambda: seen.append("ok"), priority=1)
        bus.subscribe("e", fail2)
        with self.assertRaises(PublishError) as ctx:
            bus.publish("e")
        self.assertEqual(ctx.exception.errors, [boom1, boom2])
        self.assertEqual(ctx.exception.called, 3)
        self.assertEqual(seen, ["ok"])

    def test_event_name_validation(self):
        bus = EventBus()
        with self.assertRaises(TypeError):
            bus.subscribe(3, print)
        with self.assertRaises(ValueError):
            bus.subscribe("", print)
        with self.assertRaises(TypeError):
            bus.publish(None)
        with self.assertRaises(ValueError):
            bus.publish("")
        with self.assertRaises(ValueError):
            bus.publish("*")
        with self.assertRaises(TypeError):
            bus.once(b"e", print)

    def test_buses_are_independent(self):
        a, b = EventBus(), EventBus()
        a.subscribe("e", lambda: None)
        self.assertEqual(b.publish("e"), 0)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
