"""Torch backends of library functions, one module per library, batch-first.

Contract of a backend (every module here follows it):

* It has the parameters (names, positions, defaults) of the library function it replaces; array
  arguments arrive as ``torch.Tensor`` on the device the call runs on, never as NumPy arrays.
* Image functions (cv2, PIL) are batch-first: a tensor of shape (N, H, W) or (N, H, W, C) in the
  library's own layout and dtype, N samples at once; one library call is a batch of one. Audio
  functions take (N, T) signals. NumPy functions take tensors of the array's own shape and follow
  NumPy's semantics on it.
* It returns tensors in the layout and dtype the library would return (uint8 results round and
  saturate as the library does), on the input's device.
* A parameter value it cannot reproduce raises ``codedag.errors.UnsupportedOperation`` so that the
  caller falls back to the original function.
* Each module exposes ``BACKENDS: dict[str, Callable]`` keyed by canonical qualified name
  (``cv2.resize``, ``numpy.clip``, ``PIL.Image.Image.resize``, ``librosa.feature.melspectrogram``).
"""
