"""Stage 2: from an execution DAG to a migration plan, as pure passes.

- :mod:`~codedag.optimize.coarsen` (:class:`GraphCoarsening`) merges repeated, isomorphic
  subgraphs into the cluster nodes of :mod:`~codedag.optimize.coarse` (:class:`CoarsenedDAG`);
- :mod:`~codedag.optimize.partition` (:class:`KWayPartitioner`) splits it k ways;
- :mod:`~codedag.optimize.refine` (:class:`IterativeOptimizer`) lowers the objective J;
- :mod:`~codedag.optimize.plan_builder` places partitions and calls on devices under the
  :mod:`~codedag.optimize.costs` model and writes the plan;
- :mod:`~codedag.optimize.manager` (:class:`OptimizerManager`) runs them in order.

Nothing is imported here, so ``import codedag.optimize`` stays cheap.
"""
