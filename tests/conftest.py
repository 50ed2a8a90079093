import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("INFILL_DEVICE", "cpu")  # tests run on the CPU; INFILL_DEVICE=cuda pytest tries a GPU
# float32 matmuls whatever the CPU (auto would pick bf16 on one with AMX): the tests that compare the fast
# path with the reference one bound float32 rounding; tests/engine/models/test_precision.py checks bf16
os.environ.setdefault("INFILL_PRECISION", "fp32")
torch.set_num_threads(1)  # tiny tensors: threads only add overhead (and CI has 2 cores)


@pytest.fixture(scope="session")
def tiny_asarm(tmp_path_factory):
    """A saved tiny random AS-ARM (alphabet 'abc', length 6, float64), loaded through the registry."""
    from engine.loading import registry
    from tests.support.tiny import save_tiny_asarm

    folder = save_tiny_asarm(tmp_path_factory.mktemp("tiny") / "tiny-asarm")
    return registry.load(str(folder))
