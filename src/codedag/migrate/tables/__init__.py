"""Element-wise runs on uint8 arrays computed as one gather from an exact lookup table.

Image pipelines turn a uint8 image into floats with a few element-wise calls
(``(img.astype(np.float32) / 255.0 - mean) / std``). Each element's result depends only on its
uint8 value and its channel, so the run is one ``cv2.LUT`` gather from a table of 256 values per
channel, computed once with the same calls.

* :mod:`.lookup`: the tables: which calls extend a run, the probe, the checks that make a table
  exact, its trials against the calls;
* :mod:`.run_values`: :class:`~.run_values.RunArray` and :class:`~.run_values.RunValue`, what a
  producer's array and its element-wise calls return;
* :mod:`.runtime`: :class:`~.runtime.TablesRuntime`, a plan's ``tables`` section applied by
  :class:`codedag.migrate.api.PipelineMigrator`.

The prefix cache gathers the runs of its chains' misses through the same tables
(:mod:`codedag.migrate.cache.prefix_values`). Nothing is imported here.
"""
