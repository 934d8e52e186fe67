"""Foundation: the op library, every library function codedag can run through torch.

* :mod:`.contract`: what an op declares (strategy, quirks, domain, tolerance) and a library's
  declaration (:class:`~.contract.Library`);
* :mod:`.facts`: what a library package declares about its library as plain data (modules the
  tracer indexes or wraps, functions kept on the CPU, distributions keying calibration);
* :mod:`.libraries`: those facts read without importing any backend, and the tables derived from
  them; :mod:`.derived`: read-only views that keep a derived table's name;
* :mod:`.names`: one canonical name per function (``numpy.clip``, never ``np.clip``);
* :mod:`.device_values`: NumPy/PIL values to device tensors and back, exactly as the library
  returns;
* :mod:`.adapters`: one adapter per kind of library (arrays, images, PIL, signals, tensors);
  :mod:`.adapter_values`: what they share (refusal reasons, results tensor by tensor, the fast
  paths' zero-copy tensors); :mod:`.tensor_adapter`: the adapter of torch functions;
* :mod:`.registry`: one :class:`~.contract.OpSpec` per canonical name, built from :mod:`.ops`;
* :mod:`.placement_blockers`: which calls a plan must not place unless the user opts in by name
  (random draws, backends declared to differ);
* :mod:`.admission`: function names from plans and DAGs admitted by the registry before anything
  is imported;
* :mod:`.exact_tables`: which element-wise NumPy calls a 256-entry lookup table computes exactly;
* :mod:`.lazy_values`: the lazy-value core the batched, prefix-cache and lookup-table values
  specialize: the recorded call, forcing, the one impersonation rule and its declared options;
* :mod:`.lazy_operators`: the operator sets of the lazy values and their one installer;
* :mod:`.host_sync`: whether a backend may read tensor values on the host to choose its path;
* :mod:`.executor`: one library call through its backend (refusal, conversion, backend, result);
* :mod:`.sources`: the file sources the library packages declare, by the names traces carry;
* :mod:`.tolerances`: the table of the tolerances the ops declare, and the comparison;
* :mod:`.probe`: the original function of a name, and a migrated call outside any plan;
* :mod:`.ops`: one package per library (``cv2``, ``numpy``, ``pil``, ``audio``, ``torch``);
* :mod:`.batched`: batched execution's engine: deferred values recording a sample's calls, run
  once per batch through the same backends;
* :mod:`.doc_tables`: the op tables of the documentation, generated from the declarations.

Nothing is imported here: ``import codedag.backends`` stays free of torch.
"""
