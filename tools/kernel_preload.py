"""What nbval's kernels import before any notebook's cell runs, imported once per pytest worker.

tools/forked_kernels.py imports this module in the fork server its kernels are forked from, so a
kernel starts with these modules loaded instead of importing them itself (about 3 s each: torch
alone is 2 s). A module belongs here if importing it once per worker costs less than importing it
in each notebook that loads it (every notebook imports torch, matplotlib, ipywidgets and normlib in
its first cells; five lessons build transformers' models) and importing it changes nothing a cell
computes or prints: it is in every kernel's ``sys.modules``. It must start no thread and look for no
kernel at import. Two are handled by the fork, in the child: matplotlib's backend is chosen here
from ``MPLBACKEND``, so it is set first, to what ipykernel sets; ipywidgets registers its comm
target when it is imported inside a kernel, so the child registers it once its kernel exists.
"""

import os

os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel does

import ipykernel.kernelapp  # noqa: E402,F401
import ipywidgets  # noqa: E402,F401
import matplotlib.pyplot  # noqa: E402,F401
import torch  # noqa: E402,F401

# torch.testing.assert_close (27 of the 43 notebooks) imports this on its first call: 1 s, sympy
# included, for DTensor support.
import torch.distributed.tensor  # noqa: E402,F401

# Lessons 03, 07, 08, 10 and 11 check normlib against transformers' LLaMA (and OLMo 2) code, built
# from config objects: 2.3 s of imports (781 modules, torch._dynamo among them) in each of them,
# 2.5 s once here.
import transformers.models.llama.modeling_llama  # noqa: E402,F401

import normlib  # noqa: E402,F401
import normlib.viz  # noqa: E402,F401
