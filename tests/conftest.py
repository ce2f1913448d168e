"""Fixtures shared by several test modules."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Torch on one thread for the test: many small tensor ops (gradchecks, marching, small batches) only wait on
    each other's threads on a shared 2-core machine (5-25x slower with two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
