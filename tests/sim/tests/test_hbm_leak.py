"""A leaking service (config `leak`): npu-smi shows its devices growing by
mb_per_h * time_scale per hour of the host's clock from ready on, and by
mb_per_request per request; other devices and a service without the knob
stay where they were. The truth records the leak and the slope a sampler
should see."""
import time
import unittest

from .sim_harness import SimTestCase, complete, parse_npu_smi, wait_for


def used(test):
    devs, _ = parse_npu_smi(test.npu_smi())
    return [d["used"] for d in devs]


class HbmLeak(SimTestCase):
    def test_leak_per_hour_grows_with_the_clock(self):
        # 36 MB/h at time scale 1000: 10 MB per second of the host's clock.
        self.make_target(sets=['leak={"mb_per_h": 36, "time_scale": 1000}'])
        p, port = self.serve(tp=1, devices="1")
        truth = self.truth()
        self.assertEqual(truth["leak"]["slope_mb_per_h"], 36000)
        self.assertIsNotNone(truth["leak"]["ready_at"])
        a = used(self)
        time.sleep(1.0)
        b = used(self)
        self.assertEqual(a[0], b[0], "a device without the service does not leak")
        self.assertGreaterEqual(b[1] - a[1], 8, "1 s at 10 MB/s")
        self.stop(p)

    def test_leak_per_request(self):
        self.make_target(sets=['leak={"mb_per_request": 7}'])
        p, port = self.serve(tp=1, devices="0")
        self.assertEqual(complete(port), 200)  # the first request takes the activation: the level changes
        a = used(self)[0]
        for _ in range(3):
            self.assertEqual(complete(port), 200)
        wait_for(lambda: used(self)[0] - a >= 21, what="3 requests of 7 MB")
        self.assertEqual(used(self)[0] - a, 21)
        self.assertEqual(self.truth()["leak"]["mb_per_request"], 7)
        self.stop(p)

    def test_no_leak_without_the_knob(self):
        self.make_target()
        p, port = self.serve(tp=1, devices="0")
        a = used(self)[0]
        time.sleep(0.5)
        self.assertEqual(used(self)[0], a)
        self.assertIsNone(self.truth().get("leak"))
        self.stop(p)


if __name__ == "__main__":
    unittest.main()
