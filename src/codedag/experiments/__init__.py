"""The demo, the example pipelines and the scaffolding of experiments.

* :mod:`.demo`: ``codedag demo``: the whole experiment on synthetic data, end to end
* :mod:`.demo_cache`: The demo's prefix cache: its own folder, emptied around the optimized run,
  and its summary
* :mod:`.demo_data`: Synthetic Kaggle-like data for ``codedag demo``: nothing is downloaded
* :mod:`.demo_settings`: Settings and result records of ``codedag demo``
* :mod:`.demo_verdict`: The one-sentence verdict of ``codedag demo``: an ordered list of rules,
  the first that applies decides
* :mod:`.demo_steps`: The steps of ``codedag demo``: device choice, loader, monitored training,
  checks, figures
* :mod:`.docker`: Docker: is there a client, an engine, an NVIDIA runtime?
* :mod:`.environment`: ``codedag env check|build|setup|run``: the experiment environment, in Docker
  or locally
* :mod:`.scaffold`: ``codedag experiment new``: one folder per Kaggle competition, from templates
* :mod:`.pipelines`: Realistic training data pipelines, synthetic and generated in memory from a
  seed
"""
