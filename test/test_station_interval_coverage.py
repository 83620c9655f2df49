"""The interval a job's status carries covers the policy's true success rate as often as Wilson's method says.

Simulation with known truth, through the station core: every job is a real ``JobRunner`` (state machine, episode
procedure, the scripted operator judging each episode and answering its score sheet, the snapshot's summary from
``station/summary.py``) over a light robot port whose policy succeeds with a known probability ``p`` (seeded) and
whose episodes end at once. For n = 10, 20, 50 and p = 0.1 ... 0.9, 2 000 jobs each: the share of jobs whose
final status's 95 % Wilson interval holds ``p`` is within 1.5 points of the interval's exact binomial coverage,
computed here from Wilson's closed form and the binomial distribution (independently of the station and of
statsmodels). The exact coverage itself lies in about 92-98 % for these n and p (92.4 % at n = 10, p = 0.3; 98.2 %
at n = 10, p = 0.4): the test checks the implementation, not the method. One test per (n, p), so parallel workers
share them.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from known_rate_port import run_job
from scipy.stats import beta, binom

from strands_robots.station.model import JobState
from strands_robots.station.scripted_operator import ScriptedOperator

JOBS = 2000
RATES = tuple(round(0.1 * i, 1) for i in range(1, 10))
TOLERANCE = 0.015
Z95 = NormalDist().inv_cdf(0.975)


def exact_wilson_coverage(n: int, p: float) -> float:
    """P(Wilson's 95 % interval of k ~ Binomial(n, p) holds p), from the closed form of the interval."""
    k = np.arange(n + 1)
    centre = (k + Z95 ** 2 / 2) / (n + Z95 ** 2)
    half = Z95 / (n + Z95 ** 2) * np.sqrt(k * (n - k) / n + Z95 ** 2 / 4)
    holds = (centre - half <= p) & (p <= centre + half)
    return float(binom.pmf(k, n, p)[holds].sum())


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("n", [10, 20, 50])
def test_the_status_interval_of_jobs_with_a_known_success_rate_covers_it_as_often_as_wilson_exactly_does(n, p):
    operator = ScriptedOperator()
    covered = successes = 0
    try:
        for job in range(JOBS):
            status, draws = run_job(n, p, seed=n * 1_000_003 + round(p * 10) * 10_007 + job, operator=operator)
            rate = status.summary.success
            # the status counts exactly what the policy did: every episode an outcome, every success seen
            assert status.state is JobState.SUCCEEDED, status.message
            assert (rate.trials, rate.successes) == (n, sum(draws)), status.summary.text()
            assert status.summary.coverage.attempted == n and not status.summary.coverage.not_scored
            covered += rate.low <= p <= rate.high
            successes += rate.successes
    finally:
        operator.close()
    exact = exact_wilson_coverage(n, p)
    assert 0.92 <= exact <= 0.985, f"n={n} p={p}: exact coverage {exact:.4f}"
    simulated = covered / JOBS
    assert abs(simulated - exact) <= TOLERANCE, \
        f"n={n} p={p}: {simulated:.4f} of {JOBS} jobs covered p, exact coverage {exact:.4f}"
    # the simulation has the truth it claims: the jobs' pooled success rate is p within 4 standard errors
    assert abs(successes / (JOBS * n) - p) <= 4 * (p * (1 - p) / (JOBS * n)) ** 0.5


def test_a_job_that_asks_for_clopper_pearson_gets_it_in_its_status():
    operator = ScriptedOperator()
    try:
        wilson, _ = run_job(10, 0.5, seed=7, operator=operator)
        exact, _ = run_job(10, 0.5, seed=7, operator=operator, intervals="clopper-pearson")
    finally:
        operator.close()
    assert wilson.summary.success.successes == exact.summary.success.successes  # the same seeded draws
    assert exact.summary.success.method.value == "clopper-pearson" and wilson.summary.success.method.value == "wilson"
    k = exact.summary.success.successes
    assert exact.summary.success.low == pytest.approx(float(beta.ppf(0.025, k, 10 - k + 1)) if k else 0.0, abs=1e-9)
    assert exact.summary.success.low <= wilson.summary.success.low
    assert exact.summary.success.high >= wilson.summary.success.high
