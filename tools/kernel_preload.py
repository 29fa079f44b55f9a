"""What nbval's kernels import before any notebook's cell runs, imported once per pytest worker.

tools/forked_kernels.py imports this module in the fork server its kernels are forked from, so a
kernel starts with these modules loaded instead of importing them itself (about 3 s each: torch
alone is 2 s). Only modules every notebook imports in its first cells belong here: a module loaded
here is in every kernel's ``sys.modules``, and importing it must have no effect that depends on the
process (no threads started, no kernel looked for). Two are handled by the fork, in the child:
matplotlib's backend is chosen here from ``MPLBACKEND``, so it is set first, to what ipykernel sets;
ipywidgets registers its comm target when it is imported inside a kernel, so the child registers it
once its kernel exists.
"""

import os

os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # as ipykernel does

import ipykernel.kernelapp  # noqa: E402,F401
import ipywidgets  # noqa: E402,F401
import matplotlib.pyplot  # noqa: E402,F401
import torch  # noqa: E402,F401

import normlib  # noqa: E402,F401
import normlib.viz  # noqa: E402,F401
