"""The functional core shared by encoders, networks and the optimiser: grid operations (``grid``), coarse-to-fine
schedules (``schedules``), compute precision (``precision``), finite phases for every finite input (``phase``)
and the C++ extension builder (``cpp_extension``). Plain functions on tensors; nothing here imports an encoder,
a network or a task."""
