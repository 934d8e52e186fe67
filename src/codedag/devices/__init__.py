"""Foundation: every hardware fact codedag reads and every hardware action it takes.

* :mod:`.cpus`: logical CPUs, the CPUs this process may run on, the CPU model;
* :mod:`.cgroups`: the process's cgroup (v1, v2, hybrid), its CPU quota, memory limit and usage;
* :mod:`.memory`: the memory this process may use (cgroup limit or the machine's), the shared
  memory folder, free and allocated bytes of a folder (for caches);
* :mod:`.container`: whether this process runs in a container, and the evidence;
* :mod:`.gpus`: GPUs through NVML behind the :class:`~.gpus.GPUs` interface, with the empty
  no-device implementation :class:`~.gpus.EmptyGPUs`, and how many GPUs this process can use;
* :mod:`.fake_nvml`: a fake NVML module for tests and demos without a GPU;
* :mod:`.cpu_energy`: CPU energy sources (RAPL powercap files, ``perf`` power events), which one
  is usable here and why the others are not, and their readers;
* :mod:`.governor`: the CPU frequency governor, read, checked and set for a session;
* :mod:`.torch_devices`: torch device names (``cpu``, ``cuda``, ``cuda:N``), which exist here,
  the default device, CUDA's availability (:func:`~.torch_devices.cuda_available`) and waiting
  for a device's queued work (:func:`~.torch_devices.synchronize`);
* :mod:`.workers`: whether this process may use CUDA (DataLoader workers and forked children do
  not), and so the device a call made here runs on;
* :mod:`.distributed`: this process's rank, world size and local rank under a launcher.

Modules here import only the standard library, psutil, torch, pynvml and :mod:`codedag.errors`;
torch and pynvml are imported inside the functions that need them. Nothing is imported here:
``import codedag.devices`` initializes no CUDA and opens no NVML.
"""
