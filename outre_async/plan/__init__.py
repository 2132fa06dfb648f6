"""Profiling and the split of one memory budget between the caches (OUTRE §4.4, design §8).

``_counts`` pre-samples the loader's plan (what an epoch reads, node by node), ``_costs`` measures what
a miss costs here, ``_knapsack`` chooses static feature rows, history slots and neighbour lists in one
knapsack over time, ``_outre_split`` is OUTRE's α grid beside it, ``_budget_plan`` turns counts, costs
and a byte budget into a plan and a predicted epoch time, ``_files`` writes and reads
``<dataset>/profile/<name>/``.
"""

from ._costs import MissCosts, measure_costs
from ._knapsack import Attribution, Choice, KnapsackInput, saved_us, solve
from ._outre_split import ALPHAS, alpha_choice, outre_split

__all__ = ["ALPHAS", "Attribution", "Choice", "KnapsackInput", "MissCosts", "alpha_choice", "measure_costs", "outre_split",
           "saved_us", "solve"]
