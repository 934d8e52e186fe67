"""Torch backends of library functions: one package per library (``cv2``, ``numpy``, ``pil``,
``audio``, ``torch``, ``scipy``), each exporting ``LIBRARY``
(:class:`~codedag.backends.contract.Library`: its adapter and the declared specs of its ops). ``random`` (Python's) declares facts only: the tracer
records its draws and the optimizer keeps cuts before them; it has no backend and no ``LIBRARY``.
``scipy``, ``skimage`` (scikit-image), ``imageio`` and ``tifffile`` have a ``LIBRARY`` without
ops: the registry owns their functions, so a cached chain starts at their readers
(``skimage.io.imread``, ``imageio.v3.imread``, ``tifffile.imread``) and runs through them (``scipy.ndimage.zoom``,
``skimage.transform.resize``), and none is placed.

Contract of a backend (every package here follows it):

* It has the parameters (names, positions, defaults) of the library function it replaces; array
  arguments arrive as ``torch.Tensor`` on the device the call runs on, never as NumPy arrays.
* Image and audio functions are batch-first: a tensor of shape (N, H, W) or (N, H, W, C) in the
  library's own layout and dtype, or (N, T) signals, N samples at once; one library call is a batch
  of one. Parameters declared ``per_sample`` may also come as one value per sample (a warp matrix
  per image, ``[N, 2, 3]``). NumPy functions take tensors of the array's own shape.
* It returns tensors in the layout and dtype the library would return (uint8 results round and
  saturate as the library does), on the input's device.
* What it does not reproduce is declared next to it (:class:`~codedag.backends.contract.Quirks`:
  dtypes, channels, a ``check`` on the call's arguments): such calls run the original function,
  refused before the backend runs. A backend may assume its declared check passed.
* Each module of a package declares its ops in ``OPS``; the package collects them.
"""
