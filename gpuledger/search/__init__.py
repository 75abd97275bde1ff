"""Adaptive search (`search.strategy: tpe | asha`): Optuna's ask/tell study behind the sweep runtime.

    search = AdaptiveSearch.open(spec, sweep_id, candidates)   # the study, persisted beside the warehouse
    trial = search.ask()                                       # the next candidate to launch, or None
    search.report(trial.trial_id, value)                       # each new value of the objective
    search.should_prune(trial.trial_id)                        # -> True: cancel it
    search.tell(trial.trial_id, value) / search.tell_pruned(...) / search.tell_failed(...)

    sim = simulate_asha(curves, slots=4, ...)                 # gpuledger.search.asha_replay: ASHA replayed
                                                               # over measured learning curves (what-if)

Only this package imports Optuna. See `gpuledger.search.study` for the samplers, the pruner and the
storage, `gpuledger.search.space` for the suggest calls (lists categorical, ranges numeric) and the
seeded points a spec with a range plans.
"""

from gpuledger.search.space import sample_points, suggest
from gpuledger.search.study import (
           STUDY_DIR,
           AdaptiveSearch,
           asks_new_points,
           is_adaptive,
           launch_order,
           prunes,
           study_path_for,
)

__all__ = ["STUDY_DIR", "AdaptiveSearch", "asks_new_points", "is_adaptive", "launch_order", "prunes",
           "sample_points", "study_path_for", "suggest"]
