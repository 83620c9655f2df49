"""Statistics for decisions, not point estimates: intervals, paired comparisons, stopping, rankings (no ROS).

What the station, the relay, the CLI and the reports compute from episode outcomes, on scipy and statsmodels.
One concept per module:

- ``proportion``: ``k`` of ``n`` with a Wilson (default) or Clopper-Pearson interval (:class:`Proportion`);
- ``mean_score``: a mean score with a seeded bootstrap interval (:class:`MeanScore`);
- ``coverage``: scored of attempted, every other episode in exactly one named bucket (:class:`Coverage`);
- ``blocks``: a complete block, one real outcome per policy (:class:`PairedBlock`, :class:`Block`);
- ``paired``: the paired 2x2 table, the difference with Newcombe's interval, the exact McNemar test;
- ``paired_power``: the exact test's power, the blocks it needs, the minimum detectable difference;
- ``e_process``: the anytime-valid evidence of a paired comparison (a Jeffreys-mixture e-value);
- ``sequential``: the stop rule and the two-policy test updated after every block;
- ``pairwise_sequential``: more than two policies, alpha split over pairs, the job-level stop rule;
- ``ranking``: Bradley-Terry strengths with intervals;
- ``arguments``: the argument checks all of them share.

Nothing is imported here (import the module you need): scipy and statsmodels are imported only when a number is
computed, so code that only carries results (the relay, the client) stays light.
"""
