"""Tests of the zbpp Python module (run by tests/python_api.sh with ZBPP_LIBRARY set)."""
import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import unittest
from dataclasses import replace
import xml.etree.ElementTree as ET

import zbpp

# The cells torch.distributed.pipelining's _load_csv understands (docs/formats.md).
CELL = re.compile(r"^(\d+)(F|I|W|B|SEND_F|RECV_F|SEND_B|RECV_B)(\d+)$")
SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_texts(text):
    root = ET.fromstring(text.encode())
    return root, ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]


class Planner(unittest.TestCase):
    def test_version_and_library(self):
        self.assertRegex(zbpp.version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(os.path.exists(zbpp.library_path()), zbpp.library_path())

    def test_every_family_generates_valid_schedules(self):
        fams = zbpp.families()
        for f in ("gpipe", "1f1b", "zb-h1", "zb-h2", "zb-v", "auto", "optimal"):
            self.assertIn(f, fams)
        costs = zbpp.Costs(f=1, b=1, w=1, comm=0)
        for fam in fams:
            with self.subTest(family=fam):
                try:
                    s = zbpp.generate(fam, 4, 8, costs=costs, time_limit=1)
                except zbpp.ZbError as e:
                    # optimal without GLPK is the only family allowed to refuse P=4, M=8
                    self.assertEqual(fam, "optimal", str(e))
                    self.assertIn("GLPK", str(e))
                    continue
                self.assertEqual((s.ranks, s.microbatches), (4, 8))
                self.assertEqual(s.stages, s.ranks * s.chunks)
                self.assertTrue(zbpp.validate(s, costs).ok, zbpp.validate(s, costs).message)
                n = sum(len(r) for r in s.actions)
                per_mb = 3 if any(a.kind == "W" for r in s.actions for a in r) else 2
                self.assertEqual(n, s.stages * s.microbatches * per_mb)

    def test_closed_forms(self):
        # c = 0, F = B = W = 1, one chunk: 1F1B bubble (P-1)(F+B+W), ZB-H1 (P-1)(F+B-W)
        P, M = 4, 8
        one = zbpp.simulate(zbpp.generate("1f1b", P, M))
        h1 = zbpp.simulate(zbpp.generate("zb-h1", P, M))
        self.assertAlmostEqual(one.makespan, M * 3 + (P - 1) * 3)
        self.assertAlmostEqual(h1.makespan, M * 3 + (P - 1) * 1)
        # bubble rate: (T - busy_max) / T
        self.assertAlmostEqual(h1.bubble_rate, (h1.span_max - h1.busy_max) / h1.span_max)
        self.assertAlmostEqual(h1.busy_max, M * 3)
        self.assertGreaterEqual(h1.idle_fraction, 0)

    def test_per_stage_costs(self):
        costs = zbpp.Costs(f=[1, 2, 1, 1], b=[1, 2, 1, 1], w=1)
        s = zbpp.generate("1f1b", 4, 4, costs=costs)
        sim = zbpp.simulate(s, costs)
        self.assertAlmostEqual(sim.ranks[1].busy, 4 * (2 + 2 + 1))
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 4, 4, costs=zbpp.Costs(f=[1, 2, 3]))

    def test_auto_respects_memory_limit(self):
        for limit in (4, 6, 8):
            s = zbpp.auto(4, 8, zbpp.Costs(comm=0.1), mem_limit=limit)
            c = zbpp.Costs(comm=0.1, mem_limit=limit)
            if s.chunks == 2:  # the per-rank costs split over two chunks
                c = zbpp.Costs(f=0.5, b=0.5, w=0.5, comm=0.1, mem=(0.5, 0, -0.5), mem_limit=limit)
            sim = zbpp.simulate(s, c)
            self.assertLessEqual(max(r.peak_memory for r in sim.ranks), limit + 1e-9)
            self.assertTrue(s.note.startswith("auto chose"), s.note)
        with self.assertRaises(zbpp.ZbError) as e:
            zbpp.auto(4, 8, zbpp.Costs(), mem_limit=0.5)
        self.assertEqual(e.exception.status, "EMEMLIMIT")

    def test_auto_respects_per_rank_limits(self):
        limits = [4, 3, 1, 4]  # rank 2 at the minimum one microbatch needs
        s = zbpp.auto(4, 8, zbpp.Costs(comm=0.1), mem_limit_ranks=limits, any_placement=False)
        sim = zbpp.simulate(s, zbpp.Costs(comm=0.1))
        for r, lim in zip(sim.ranks, limits):
            self.assertLessEqual(r.peak_memory, lim + 1e-9)
        # the same limits through Costs, and validate() checks them rank by rank
        self.assertTrue(zbpp.validate(s, zbpp.Costs(comm=0.1, mem_limit_ranks=limits)).ok)
        h1 = zbpp.generate("1f1b", 4, 8)
        self.assertTrue(zbpp.validate(h1, zbpp.Costs(mem_limit_ranks=[4, 3, 2, 1])).ok)
        v = zbpp.validate(h1, zbpp.Costs(mem_limit_ranks=[4, 2, 2, 1]))
        self.assertFalse(v.ok)
        self.assertIn("rank 1", v.message)
        rows = zbpp.plan(4, 8, zbpp.Costs(), mem_limit_ranks=[3, 4, 2, 4], time_limit=1)
        self.assertTrue([r for r in rows if r.fits])
        with self.assertRaises(zbpp.ZbError) as e:
            zbpp.auto(4, 8, zbpp.Costs(), mem_limit_ranks=[4, 4, 4])
        self.assertIn("3 limits given, ranks is 4", str(e.exception))
        with self.assertRaises(zbpp.ZbError):
            zbpp.plan(4, 8, zbpp.Costs(), mem_limit_ranks=[4, -1, 4, 4])
        with self.assertRaises(TypeError):
            zbpp.best(4, 8, zbpp.Costs(), mem_limit_ranks=4)

    def test_plan_sorted_and_within_limit(self):
        rows = zbpp.plan(4, 8, zbpp.Costs(comm=0.1), mem_limit=5, time_limit=1)
        fits = [r for r in rows if r.fits]
        self.assertTrue(fits)
        self.assertEqual(rows[:len(fits)], fits)  # fitting rows first
        self.assertEqual([r.makespan for r in fits], sorted(r.makespan for r in fits))
        for r in fits:
            self.assertLessEqual(r.peak_memory, 5 + 1e-9)
        for r in rows[len(fits):]:
            self.assertTrue(r.reason)
        self.assertIn("gpipe", [r.family for r in rows[len(fits):]])  # P*M_F memory > 5

    def test_best_is_plans_first_row(self):
        costs = zbpp.Costs(f=1.0, b=1.0, w=0.8, comm=0.05)
        for limit in (2.5, 6):
            top = zbpp.plan(4, 8, costs, mem_limit=limit, time_limit=1)[0]
            s = zbpp.best(4, 8, costs, mem_limit=limit, time_limit=1)
            sim = zbpp.simulate(s)  # with s.costs, the split per-stage model
            self.assertEqual((s.name, s.chunks, s.placement), (top.family, top.chunks, top.placement))
            self.assertAlmostEqual(sim.makespan, top.makespan, places=9)
            self.assertLessEqual(max(r.peak_memory for r in sim.ranks), limit + 1e-9)
        with self.assertRaises(zbpp.ZbError):
            zbpp.best(4, 8, costs, mem_limit=0.1, time_limit=1)

    def test_split_matches_the_library(self):
        per_rank = zbpp.Costs(f=[1, 2, 3], b=[2, 2, 2], w=[1, 1, 4], comm=[0.1, 0.2, 0.3])
        split = per_rank.split(3, 2, "v")
        self.assertEqual(split.f, [0.5, 1.0, 1.5, 1.5, 1.0, 0.5])  # stage s>=P on rank 2P-1-s
        self.assertEqual(split.comm, [0.1, 0.2, 0.3, 0.3, 0.2, 0.1])
        # the same schedule simulated with the Python split and with plan()'s C split agree
        s = zbpp.generate("zb-v", 3, 6, costs=split)
        rows = {r.family: r for r in zbpp.plan(3, 6, per_rank, time_limit=1)}
        self.assertAlmostEqual(zbpp.simulate(s).makespan, rows["zb-v"].makespan, places=9)

    def test_validate_reports_problems(self):
        s = zbpp.generate("1f1b", 4, 4)
        broken = zbpp.Schedule(s.name, s.ranks, s.chunks, s.stages, s.microbatches,
                               s.placement, [list(r) for r in s.actions])
        broken.actions[2].pop()  # a missing action
        v = zbpp.validate(broken)
        self.assertFalse(v.ok)
        self.assertEqual(v.status, "ESCHEDULE")
        self.assertTrue(v.message)
        # memory limit: 1F1B keeps P activations in flight on rank 0
        v = zbpp.validate(s, zbpp.Costs(mem_limit=2))
        self.assertEqual(v.status, "EMEMLIMIT")
        # deadlock: rank 1 runs its backwards before its forwards
        dl = zbpp.Schedule("dl", 2, 1, 2, 1, "loop",
                           [[zbpp.Action("F", 0, 0), zbpp.Action("BW", 0, 0)],
                            [zbpp.Action("BW", 1, 0), zbpp.Action("F", 1, 0)]])
        self.assertFalse(zbpp.validate(dl).ok)
        with self.assertRaises(zbpp.ZbError):
            zbpp.simulate(dl)

    def test_bad_input_raises(self):
        with self.assertRaises(zbpp.ZbError) as e:
            zbpp.generate("no-such-family", 4, 8)
        self.assertIn("no-such-family", str(e.exception))
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 0, 8)
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 4, 8, costs=zbpp.Costs(f=-1))
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 4, 8, costs=zbpp.Costs(mem=(1, 1, 1)))
        with self.assertRaises(zbpp.ZbError):
            zbpp.from_csv("0F0,0X1\n")


class Offload(unittest.TestCase):
    # copies of 0.125 (1 byte at 8 per time unit); a B frees 0.6 of its F's memory
    COSTS = zbpp.Costs(f=1, b=1, w=1, comm=0.1, mem=(1, -0.6, -0.4), stash_bytes=1, copy_bw=8)

    def test_generate_all_and_auto(self):
        s = zbpp.generate("zb-h1", 4, 8, costs=self.COSTS, offload="all")
        kinds = [a.kind for row in s.actions for a in row]
        self.assertEqual(kinds.count("O"), kinds.count("L"))
        self.assertGreater(kinds.count("O"), 0)
        plain = zbpp.simulate(zbpp.generate("zb-h1", 4, 8), self.COSTS)
        sim = zbpp.simulate(s, self.COSTS)
        self.assertAlmostEqual(sim.makespan, plain.makespan)  # the copies hide behind compute
        self.assertLess(max(r.peak_memory for r in sim.ranks),
                        max(r.peak_memory for r in plain.ranks))
        # through the CSV dialect and back
        self.assertEqual(zbpp.from_csv(zbpp.to_csv(s)).actions, s.actions)
        auto = zbpp.generate("zb-h1", 4, 8, costs=replace(self.COSTS, mem_limit=3.2),
                             offload="auto")
        self.assertIn("offload auto", auto.note)
        self.assertTrue(zbpp.validate(auto, replace(self.COSTS, mem_limit=3.2)).ok)
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("zb-h1", 4, 8, offload="all", recompute="all")
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("zb-h1", 4, 8, offload="some")

    def test_plan_rows(self):
        rows = zbpp.plan(4, 8, self.COSTS, mem_limit=2.5, offload="auto")
        fams = {r.family: r for r in rows}
        self.assertTrue(fams["zb-h1+O"].fits)
        self.assertFalse(fams["zb-h1"].fits)
        self.assertLessEqual(fams["zb-h1+O"].peak_memory, 2.5)


class Recompute(unittest.TestCase):
    COSTS = zbpp.Costs(f=1, b=1, w=0.6, comm=0.05, mem=(1, -0.5, -0.5), mem_keep=0.1)

    def test_all_on_a_family_and_the_memory_it_needs(self):
        s = zbpp.generate("1f1b", 4, 8, recompute="all")
        # every microbatch on ranks 0-2; the last rank's F's directly precede their backward
        self.assertEqual(sum(a.kind == "R" for row in s.actions for a in row), 24)
        # 4 F's keep 0.1 each, one microbatch rebuilt: peak 1.3 (memory model 1, 0, -1)
        self.assertTrue(zbpp.validate(s, zbpp.Costs(mem_keep=0.1, mem_limit=1.3)).ok)
        self.assertEqual(zbpp.validate(s, zbpp.Costs(mem_keep=0.1, mem_limit=1.2)).status,
                         "EMEMLIMIT")
        # the R time counts in the simulation
        slow = zbpp.simulate(s, zbpp.Costs(r=3)).makespan
        self.assertGreater(slow, zbpp.simulate(s, zbpp.Costs(r=0)).makespan)

    def test_push_marks_the_f_of_an_r(self):
        A = zbpp.Action
        s = zbpp.Schedule("hand", 1, 1, 1, 1, "loop",
                          [[A("F", 0, 0), A("R", 0, 0), A("B", 0, 0), A("W", 0, 0)]])
        # a non-saving F keeps 0.25, its R adds the other 0.75: peak 1, not 1.75
        self.assertTrue(zbpp.validate(s, zbpp.Costs(mem_keep=0.25, mem_limit=1.0)).ok)

    def test_auto_fits_below_the_plain_minimum(self):
        with self.assertRaises(zbpp.ZbError):
            zbpp.auto(4, 8, self.COSTS, mem_limit=0.9)
        s = zbpp.auto(4, 8, self.COSTS, mem_limit=0.9, recompute="auto")
        self.assertIn("recompute", s.note)
        self.assertTrue(zbpp.validate(s).ok)

    def test_plan_rows_and_bad_modes(self):
        rows = zbpp.plan(4, 17, self.COSTS, mem_limit=2, recompute="all")
        fits = {r.family for r in rows if r.fits}
        self.assertIn("1f1b+R", fits)
        self.assertNotIn("1f1b", fits)
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 4, 8, recompute="auto")
        with self.assertRaises(zbpp.ZbError):
            zbpp.generate("1f1b", 4, 8, recompute="some")
        with self.assertRaises(zbpp.ZbError):
            zbpp.validate(zbpp.generate("1f1b", 4, 8), zbpp.Costs(mem_keep=2))


class Formats(unittest.TestCase):
    def test_csv_is_what_pytorch_reads_and_round_trips(self):
        for fam in ("1f1b", "zb-h1", "zb-v", "interleaved-1f1b"):
            s = zbpp.generate(fam, 4, 8)
            for comms in (False, True):
                text = s.to_csv(comms)
                rows = list(csv.reader(io.StringIO(text)))
                self.assertEqual(len(rows), 4)
                for row in rows:
                    for cell in row:
                        self.assertRegex(cell, CELL)
                kinds = {CELL.match(c).group(2) for row in rows for c in row}
                self.assertEqual("SEND_F" in kinds, comms)
                back = zbpp.from_csv(text)
                self.assertEqual(zbpp.to_csv(back, comms), text)
                self.assertEqual((back.ranks, back.chunks, back.placement),
                                 (s.ranks, s.chunks, s.placement))
                if not comms:
                    self.assertEqual(back.actions, s.actions)
        # our B is PyTorch's I, our BW PyTorch's B
        self.assertIn("0I0", zbpp.generate("zb-h1", 2, 2).to_csv())
        self.assertIn("0B0", zbpp.generate("1f1b", 2, 2).to_csv())

    def test_trace_json(self):
        s = zbpp.generate("zb-h1", 4, 8)
        tr = json.loads(zbpp.trace_json(s, us_per_unit=1000))
        comp = [e for e in tr["traceEvents"] if e.get("ph") == "X"]
        self.assertEqual(len(comp), 4 * 8 * 3)
        self.assertEqual(max(e["ts"] + e["dur"] for e in comp), 27 * 1000)

    def test_summary_and_ascii(self):
        s = zbpp.generate("zb-h1", 4, 8)
        js = json.loads(zbpp.summary_json(s))
        self.assertAlmostEqual(js["makespan"], 27)
        self.assertIn("r3 |", zbpp.ascii_grid(s))

    def test_svg_and_arrows(self):
        s = zbpp.generate("zb-v", 4, 12)
        root, texts = svg_texts(zbpp.svg(s, title="mine"))
        self.assertTrue(any(t.startswith("mine") for t in texts))
        self.assertIn("F forward", texts)
        self.assertNotIn("BW full backward (B+W)", texts)  # only kinds present
        self.assertTrue(any("lighter: its second chunk" in t for t in texts))
        self.assertIn("10", texts)  # two-digit microbatch numbers are drawn
        self.assertTrue(any(t.startswith("time (") for t in texts))
        plain = len(list(root.iter(SVG_NS + "line")))
        root2, _ = svg_texts(zbpp.svg(s, arrows=True))
        # one arrow per cross-rank message, counted from the schedule itself:
        # F(s) -> F(s+1) and B(s+1) -> B(s) wherever the two stages sit on different ranks
        stage_rank = {}
        for r, row in enumerate(s.actions):
            for a in row:
                stage_rank[a.stage] = r
        msgs = sum(2 * s.microbatches for st in range(s.stages - 1)
                   if stage_rank[st] != stage_rank[st + 1])
        self.assertEqual(len(list(root2.iter(SVG_NS + "line"))) - plain, msgs)

    def test_overlay(self):
        s = zbpp.generate("1f1b", 2, 4)
        pred = zbpp.simulate(s)
        meas = zbpp.simulate(s)
        for rt in meas.ranks:
            for a in rt.actions:
                a.start, a.end = a.start * 1.5 + 3, a.end * 1.5 + 3
        root, texts = svg_texts(zbpp.overlay_svg(meas, pred, title="run", time_unit="ms"))
        self.assertTrue(any("(1.50x)" in t for t in texts), texts[0])
        self.assertIn("rank 1 measured", texts)
        self.assertIn("time (ms)", texts)
        meas.ranks[0].actions[0].end = -5  # end before start
        with self.assertRaises(zbpp.ZbError):
            zbpp.overlay_svg(meas, pred)


class ArgumentErrors(unittest.TestCase):
    """A bad argument is named: ZbError for a bad value, TypeError for a bad type, never a
    ctypes error or an AttributeError from deep inside."""

    def test_values_and_types_are_named(self):
        with self.assertRaisesRegex(zbpp.ZbError, "ranks must be >= 1, got 0"):
            zbpp.generate("1f1b", ranks=0, microbatches=4)
        with self.assertRaisesRegex(TypeError, "ranks must be an int, not str '4'"):
            zbpp.generate("1f1b", ranks="4", microbatches=4)
        with self.assertRaisesRegex(TypeError, "microbatches must be an int"):
            zbpp.plan(4, 8.0)
        with self.assertRaisesRegex(TypeError, "schedule must be a Schedule, not NoneType"):
            zbpp.simulate(None)
        with self.assertRaisesRegex(TypeError, "costs must be a Costs or None, not int"):
            zbpp.best(4, 8, costs=3)
        with self.assertRaisesRegex(TypeError, "schedule must be a Schedule, not str"):
            zbpp.validate("1f1b")
        with self.assertRaisesRegex(TypeError, "family must be a str"):
            zbpp.generate(None, 4, 8)


class Loading(unittest.TestCase):
    def test_bad_library_path_is_one_clear_error(self):
        env = dict(os.environ, ZBPP_LIBRARY="/nonexistent/libzbpp.so")
        r = subprocess.run([sys.executable, "-c", "import zbpp"], env=env,
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ZBPP_LIBRARY", r.stderr)
        self.assertIn("/nonexistent/libzbpp.so", r.stderr)


if __name__ == "__main__":
    unittest.main()
