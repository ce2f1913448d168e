"""The names of the implementations that can compute an encoder, the one list of them: encoders/backends.py
chooses among them, encoders declare theirs from it, and inr-fit's --backend and ns-train's ``backend`` offer it.
In the lowest layer, without torch, so that the command line reads it before torch loads."""

KERNELS = ("torch", "cpp", "triton")  # inr_enc's own: PyTorch, and the C++ and Triton grid kernels (ops/grid)
IMPLEMENTATIONS = (*KERNELS, "tcnn")  # and tiny-cuda-nn's (encoders/tcnn.py)
BACKENDS = ("auto", *IMPLEMENTATIONS)  # what a run may ask for; "auto" takes an encoder's first that can run
