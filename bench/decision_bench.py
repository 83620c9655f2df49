"""Trials to a decision: the anytime-valid stop rule against a fixed-size paired exact test, and the intervals.

Seeded simulations with known truth through ``strands_robots.stats`` (not pass/fail; the CI tests pin the
targets). Printed:

- the fixed-size exact McNemar test: blocks for 95 % and 80 % power at alpha 0.05 (exact, not simulated);
- trials to a decision through the station's comparison core (``station.comparison``, which a comparison job's
  ``JobRunner`` runs: seeded block orders, outcomes, the stop rule after every complete block) at 0.8 vs 0.4,
  0.7 vs 0.5 and 0.5 vs 0.5, beside the fixed-size test's blocks for 95 % power;
- the e-process stop rule (``replay_stop_rule``, the same rule a job applies block by block) at 0.8 vs 0.4 and
  0.7 vs 0.5: mean / median / 95th percentile blocks to the verdict, right / wrong / not-separated shares, and
  the mean as a share of the fixed-size test's 95 %-power blocks;
- A/A: the false-winner share of the e-process looked at after every block, beside a fixed-size exact test
  looked at after every block (the mistake the e-process exists to avoid);
- three equal policies: the family-wise false-winner share with alpha split over the pairs;
- the Wilson interval's coverage: simulated (2 000 jobs, through the API) against exact, n = 10, 20, 50;
- the bootstrap interval of a mean score: its coverage at small n;
- Bradley-Terry: the order recovered and the intervals' coverage of the true strengths.

Usage (about a minute on a quiet 2-core machine)::

    .venv/bin/python bench/decision_bench.py              # 10 000 runs per setting
    .venv/bin/python bench/decision_bench.py --runs 2000  # quicker
    .venv/bin/python bench/decision_bench.py --only-core  # the fixed-size test and the station core's table
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "strands_robots" / "test"))

from strands_robots.stats.blocks import Block  # noqa: E402
from strands_robots.stats.e_process import E_PROCESS_NAME  # noqa: E402
from strands_robots.stats.mean_score import mean_score_interval  # noqa: E402
from strands_robots.stats.paired_power import blocks_needed  # noqa: E402
from strands_robots.stats.pairwise_sequential import PairwiseSequentialTests  # noqa: E402
from strands_robots.stats.proportion import proportion_intervals  # noqa: E402
from strands_robots.stats.ranking import bradley_terry  # noqa: E402
from strands_robots.stats.sequential import StopRule, Verdict, replay_stop_rule  # noqa: E402

ALPHA = 0.05
PAIRS = ((0.8, 0.4), (0.7, 0.5))


def machine() -> str:
    import scipy
    import statsmodels

    load = os.getloadavg()
    return (f"{platform.node()}: {platform.system()} {platform.release()}, {os.cpu_count()} cores, load "
            f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, Python {platform.python_version()}, numpy "
            f"{np.__version__}, scipy {scipy.__version__}, statsmodels {statsmodels.__version__}; "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M}Z")


def outcomes(p: float, runs: int, blocks: int, rng: np.random.Generator) -> np.ndarray:
    return rng.random((runs, blocks)) < p


def fixed_size_table() -> dict:
    print("\nFixed-size exact McNemar test (alpha 0.05, independent outcomes; exact power, not simulated)")
    print(f"  {'pair':<11} {'blocks for 95 % power':>22} {'blocks for 80 % power':>22}")
    fixed = {}
    for p_a, p_b in PAIRS:
        n95 = blocks_needed(p_a, p_b, alpha=ALPHA, power=0.95)
        n80 = blocks_needed(p_a, p_b, alpha=ALPHA, power=0.8)
        fixed[(p_a, p_b)] = n95
        print(f"  {p_a} vs {p_b:<4} {n95:>22} {n80:>22}")
    return fixed


def e_process_table(fixed: dict, runs: int, seed: int) -> None:
    print(f"\nE-process stop rule ({E_PROCESS_NAME}), alpha 0.05, {runs} seeded runs per row")
    print(f"  {'pair':<11} {'max':>4} {'reach':>5} {'mean':>6} {'median':>6} {'p95':>5} {'right %':>8} "
          f"{'wrong %':>8} {'not sep %':>9} {'mean / fixed95':>15}")
    for p_a, p_b in PAIRS:
        n95 = fixed[(p_a, p_b)]
        for max_blocks in sorted({100, 2 * n95}):
            rng = np.random.default_rng(seed)
            a, b = outcomes(p_a, runs, max_blocks, rng), outcomes(p_b, runs, max_blocks, rng)
            for reach in (False, True):
                result = replay_stop_rule(a, b, StopRule(max_blocks, ALPHA, stop_when_out_of_reach=reach))
                used = result.blocks_used
                print(f"  {p_a} vs {p_b:<4} {max_blocks:>4} {'yes' if reach else 'no':>5} {used.mean():>6.1f} "
                      f"{np.median(used):>6.0f} {np.percentile(used, 95):>5.0f} "
                      f"{100 * result.share(Verdict.A_BETTER):>8.1f} {100 * result.share(Verdict.B_BETTER):>8.2f} "
                      f"{100 * result.share(Verdict.NOT_SEPARATED):>9.1f} {100 * used.mean() / n95:>14.0f}%")
    print("  (max: max_blocks; reach: also stop not_separated once separation is out of reach; right = a_better)")


def station_core_table(fixed: dict, runs: int, seed: int) -> None:
    """Trials to a decision through the station's comparison core (``station.comparison``, what JobRunner runs)."""
    from known_rate_port import simulate_comparisons

    print(f"\nThrough the station's comparison core (station.comparison: seeded block orders, outcomes, the stop "
          f"rule after every complete block), alpha 0.05, max_blocks 2 x fixed95, {runs} seeded jobs per row")
    print(f"  {'pair':<11} {'fixed95':>7} {'max':>4} {'mean':>6} {'median':>6} {'p95':>5} {'right %':>8} "
          f"{'wrong %':>8} {'not sep %':>9} {'mean / fixed95':>15} {'s':>5}")
    for (p_a, p_b), row_seed in zip(PAIRS + ((0.5, 0.5),), range(seed, seed + 3)):
        n95 = fixed.get((p_a, p_b), fixed[PAIRS[0]])
        started = time.perf_counter()
        verdicts, used = simulate_comparisons({"a": p_a, "b": p_b}, runs, 2 * n95, seed=row_seed)
        took = time.perf_counter() - started
        right = np.mean(verdicts == "a_better") if p_a != p_b else float("nan")
        wrong = np.mean(verdicts == "b_better") if p_a != p_b else np.mean(verdicts != "not_separated")
        print(f"  {p_a} vs {p_b:<4} {n95:>7} {2 * n95:>4} {used.mean():>6.1f} {np.median(used):>6.0f} "
              f"{np.percentile(used, 95):>5.0f} {100 * right:>8.1f} {100 * wrong:>8.2f} "
              f"{100 * np.mean(verdicts == 'not_separated'):>9.1f} {100 * used.mean() / n95:>14.0f}% {took:>5.1f}")
    print("  (right = the better policy named; for 0.5 vs 0.5 'wrong' is any winner named, against the fixed95 of "
          "0.8 vs 0.4)")


def a_a_table(runs: int, seed: int) -> None:
    print(f"\nA/A: equal policies, looked at after every block, {runs} seeded runs per row")
    print(f"  {'rate':>5} {'max':>5} {'e-process false winner %':>25} {'fixed-size test peeked, false winner %':>39}")
    from scipy.stats import binom

    for p in (0.5, 0.8):
        for max_blocks in (100, 200):
            rng = np.random.default_rng(seed)
            a, b = outcomes(p, runs, max_blocks, rng), outcomes(p, runs, max_blocks, rng)
            result = replay_stop_rule(a, b, StopRule(max_blocks, ALPHA))
            e_false = result.share(Verdict.A_BETTER) + result.share(Verdict.B_BETTER)
            only_a, only_b = np.cumsum(a & ~b, axis=1), np.cumsum(~a & b, axis=1)
            p_values = np.minimum(1.0, 2 * binom.cdf(np.minimum(only_a, only_b), only_a + only_b, 0.5))
            peeked = np.mean((p_values <= ALPHA).any(axis=1))
            print(f"  {p:>5} {max_blocks:>5} {100 * e_false:>25.2f} {100 * peeked:>39.1f}")


def three_policies(runs: int, seed: int) -> None:
    max_blocks = 150
    rng = np.random.default_rng(seed)
    draws = {name: outcomes(0.5, runs, max_blocks, rng) for name in ("a", "b", "c")}
    job = PairwiseSequentialTests.start(draws, StopRule(max_blocks, ALPHA))
    any_winner = np.zeros(runs, dtype=bool)
    for a, b in job.pairs:
        pair = replay_stop_rule(draws[a], draws[b], job.tests[0].rule)
        any_winner |= np.isin(pair.verdicts, [Verdict.A_BETTER.value, Verdict.B_BETTER.value])
    print(f"\nThree equal policies (rate 0.5, max {max_blocks} blocks, alpha 0.05 split over 3 pairs): "
          f"any false winner in {100 * any_winner.mean():.2f} % of {runs} jobs")


def wilson_table(seed: int) -> None:
    from scipy.stats import binom
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.975)
    print("\nWilson 95 % coverage: simulated over 2000 jobs (intervals from the API) / exact (closed form), %")
    ps = [round(p, 1) for p in np.arange(0.1, 0.91, 0.1)]
    print("  n   " + " ".join(f"{'p=' + str(p):>12}" for p in ps))
    rng = np.random.default_rng(seed)
    worst = 0.0
    for n in (10, 20, 50):
        cells = []
        k = np.arange(n + 1)
        centre = (k + z * z / 2) / (n + z * z)
        half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4)
        for p in ps:
            exact = binom.pmf(k, n, p)[(centre - half <= p) & (p <= centre + half)].sum()
            intervals = proportion_intervals(rng.binomial(n, p, size=2000).tolist(), n)
            simulated = np.mean([r.low <= p <= r.high for r in intervals])
            worst = max(worst, abs(simulated - exact))
            cells.append(f"{100 * simulated:5.1f}/{100 * exact:4.1f}")
        print(f"  {n:<3} " + " ".join(f"{c:>12}" for c in cells))
    print(f"  largest |simulated - exact|: {100 * worst:.2f} points (target: 1.5)")


def mean_score_table(reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = 2 / 7
    print(f"\nMean-score bootstrap, 95 % BCa, scores ~ Beta(2, 5) (mean {truth:.3f}); coverage over {reps} samples")
    for n in (3, 5, 10, 20, 40):
        hits = 0
        for _ in range(reps):
            result = mean_score_interval(rng.beta(2, 5, size=n), n_resamples=2000, seed=int(rng.integers(1 << 31)))
            hits += result.low <= truth <= result.high
        print(f"  n={n:<3} coverage {100 * hits / reps:5.1f} %")


def bradley_terry_table(suites: int, seed: int) -> None:
    rates = {"p20": 0.2, "p40": 0.4, "p60": 0.6, "p80": 0.8}
    logits = {k: math.log(p / (1 - p)) for k, p in rates.items()}
    mean = float(np.mean(list(logits.values())))
    truth = {k: v - mean for k, v in logits.items()}
    rng = np.random.default_rng(seed)
    print(f"\nBradley-Terry, 4 policies at 0.2/0.4/0.6/0.8, {suites} seeded suites per row")
    for n_blocks in (20, 40, 80, 160):
        order_ok, hits, total = 0, 0, 0
        for _ in range(suites):
            draws = rng.random((n_blocks, 4)) < np.array(list(rates.values()))
            ranking = bradley_terry([Block(dict(zip(rates, map(bool, row)))) for row in draws])
            order_ok += ranking.order == ("p80", "p60", "p40", "p20")
            for entry in ranking.entries:
                hits += entry.low <= truth[entry.policy] <= entry.high
                total += 1
        print(f"  {n_blocks:>4} blocks: order recovered {100 * order_ok / suites:5.1f} %, "
              f"95 % intervals cover the truth {100 * hits / total:5.1f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="simulated runs per stop-rule setting")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--score-reps", type=int, default=400, help="samples per n for the mean-score coverage")
    parser.add_argument("--suites", type=int, default=200, help="suites per row for Bradley-Terry")
    parser.add_argument("--core-runs", type=int, default=1000,
                        help="comparison jobs per row through the station's comparison core")
    parser.add_argument("--only-core", action="store_true",
                        help="print the fixed-size test and the station core's table only")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"decision_bench on {machine()}")
    fixed = fixed_size_table()
    station_core_table(fixed, args.core_runs, args.seed + 6)
    if args.only_core:
        print(f"\n({time.perf_counter() - started:.0f} s)")
        return
    e_process_table(fixed, args.runs, args.seed)
    a_a_table(args.runs, args.seed + 1)
    three_policies(args.runs, args.seed + 2)
    wilson_table(args.seed + 3)
    mean_score_table(args.score_reps, args.seed + 4)
    bradley_terry_table(args.suites, args.seed + 5)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
