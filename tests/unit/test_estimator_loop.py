"""The one online estimation loop (estimator/loop.py) that ``intcc estimator run`` and the
adaptive agent's estimator share: records to the flows, late starters' replay, verdicts
published where they are made, a failing flow dropped with its error."""
from types import SimpleNamespace

from estimator.features import TraceError
from estimator.loop import EstimationLoop, WatchedFlow


class FakeEstimator:
    uses_int = False

    def __init__(self, steps=()):
        self.records, self.steps = [], list(steps)

    def add_record(self, rec):
        self.records.append(rec)

    def step(self):
        return self.steps.pop(0) if self.steps else None

    def record(self, step):
        return SimpleNamespace(flow_id=step.flow_id, estimate=step.estimate)


def rec(n, kind="flow"):
    return SimpleNamespace(type=kind, n=n)


class Late(WatchedFlow):
    def __init__(self, est, fail=None):
        super().__init__(est)
        self.started, self.fail = False, fail

    def start(self):
        if self.fail:
            raise self.fail
        self.started = True


def test_records_reach_started_flows_and_a_late_starter_gets_the_recent_ones_replayed():
    loop = EstimationLoop(replay_s=10.0)
    early = WatchedFlow(FakeEstimator(), tail=None)
    early.started = True
    loop.watch("early", early)
    loop.add_record(rec(1))
    loop.add_record(rec(2, "hop"))
    loop.add_record(SimpleNamespace(type="estimate"))               # not the sink's: left out
    loop.step_all()
    late = Late(FakeEstimator())
    loop.watch("late", late)
    loop.add_record(rec(3))
    loop.step_all()
    assert [r.n for r in early.est.records] == [1, 2, 3]
    assert [r.n for r in late.est.records] == [1, 2, 3]            # replayed in order at its start, once each


def test_a_verdict_is_published_where_it_is_made_and_returned():
    published = []
    step = SimpleNamespace(flow_id="00000000000000aa", estimate="bbr")
    loop = EstimationLoop(SimpleNamespace(publish=published.append))
    flow = WatchedFlow(FakeEstimator([step, SimpleNamespace(flow_id=None, estimate="x")]))
    flow.started = True
    loop.watch(7, flow)
    out = loop.step_all()
    assert [(k, s.estimate) for k, s, _ in out] == [(7, "bbr")] and [p.estimate for p in published] == ["bbr"]
    assert loop.step_all() == [] and len(published) == 1            # a step without a flow id: nothing


def test_a_flow_that_fails_is_forgotten_after_its_error_and_the_others_go_on():
    errors = []
    loop = EstimationLoop()
    loop.watch("bad", Late(FakeEstimator(), fail=TraceError("no capture")))
    good = WatchedFlow(FakeEstimator([SimpleNamespace(flow_id="ab", estimate="reno")]))
    good.started = True
    loop.watch("good", good)
    out = loop.step_all(lambda key, e: errors.append((key, str(e))))
    assert errors == [("bad", "no capture")] and list(loop.flows) == ["good"] and len(out) == 1
