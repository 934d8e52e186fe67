"""torch.profiler bottleneck scenarios and a diagnosis of what bounds a training step.

Modules: ``config`` (ProfileConfig), ``scenarios`` (the four bottlenecks), ``program``
(StepProgram), ``measure`` (the timed and profiled loop), ``events`` (per-step counts from
profiler events), ``diagnosis`` (rules over figures), ``result`` (figures, top ops, JSON) and
``api`` (profile_scenario, profile_target). Importing this package imports no torch.
"""
