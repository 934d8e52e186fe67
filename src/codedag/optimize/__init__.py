"""Stage 2: from an execution DAG to a migration plan, as pure passes.

- :mod:`~codedag.optimize.coarsen` (:class:`GraphCoarsening`) merges repeated, isomorphic
  subgraphs into the cluster nodes of :mod:`~codedag.optimize.coarse` (:class:`CoarsenedDAG`);
- :mod:`~codedag.optimize.partition` (:class:`KWayPartitioner`) splits it k ways;
- :mod:`~codedag.optimize.refine` (:class:`IterativeOptimizer`) lowers the objective J;
- :mod:`~codedag.optimize.plan_builder` places partitions and calls on devices under the
  :mod:`~codedag.optimize.costs` model; the other passes give the plan's other sections and
  :mod:`~codedag.optimize.assemble` joins them into the plan;
- :mod:`~codedag.optimize.manager` (:class:`OptimizerManager`) runs them in order.

* :mod:`.assemble`: One migration plan from the passes' typed sections, with each function given
  one owner
* :mod:`.batched`: Deciding which sample chains run batched: measure, then decide (a pure pass)
* :mod:`.cache`: Finding each sample's deterministic prefix in a traced DataLoader batch, and
  cutting it for the prefix cache
* :mod:`.cache_bytes`: A prefix cut's bytes against the compute they spare: why a cut sits where
  it does (pure)
* :mod:`.cache_conflicts`: The prefix cache beside placement and batched chains (a pure pass over
  the plan)
* :mod:`.chains`: Finding each sample's chain of deferrable calls in a traced DataLoader batch (a
  pure pass)
* :mod:`.coarse`: The coarsened DAG: cluster nodes that stand for one or many isomorphic original
  nodes
* :mod:`.coarsen`: Graph coarsening: merge repeated, isomorphic subgraphs into cluster nodes
* :mod:`.costs`: The cost model of placement and the question "can this call run on the
  accelerator?"
* :mod:`.explain`: A human view of a migration plan: one row per call, with the measured figures
  behind it
* :mod:`.export`: Writing the optimizer's stage results: JSON for each pass, DOT for the coarsened
  graph
* :mod:`.isomorphism`: Grouping subgraphs into isomorphism classes, exactly
* :mod:`.manager`: OptimizerManager: coarsen, partition, refine and plan, in three stages
* :mod:`.measurements`: What a plan is made from, measured once per DAG: one frozen value passed
  to the passes
* :mod:`.partition`: K-way partitioning: k centers, then greedy region growing from them
* :mod:`.placement`: The placement rule: a call leaves the CPU only when a measurement says it wins
* :mod:`.plan_builder`: The migration plan of a partitioned, coarsened DAG: every call with its
  device and the reason
* :mod:`.refine`: Iterative refinement: boundary moves from a gain heap that lower the objective
* :mod:`.result`: What OptimizerManager.optimize returns: the passes' outputs as typed fields, also
  readable as a dict
* :mod:`.samples`: The traced samples of a DataLoader batch: which calls of the trace each sample
  made
* :mod:`.schedule`: Makespan of a two-device placement under the cost model, and HEFT as a
  reference scheduler
* :mod:`.tables`: Finding element-wise runs on uint8 arrays in a traced batch, for lookup tables
  (a pure pass)
* :mod:`.synthetic`: Synthetic execution DAGs shaped like a traced DataLoader, for tests and
  benchmarks
* :mod:`.workgraph`: A compact, index-based view of a (coarsened) DAG for the partitioning passes

Nothing is imported here, so ``import codedag.optimize`` stays cheap.
"""
