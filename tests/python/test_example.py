"""examples/python/train_fashion_mnist.py, briefly: 2 ranks, one epoch on the first 6 400 images,
each policy. The example itself fails where the replicas differ; here each run must end with
its result line and learn (test accuracy well above the 10% of chance)."""
import os
import re
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "train_fashion_mnist.py")
DATA = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(DATA), reason="needs Debian's dataset-fashion-mnist")
@pytest.mark.parametrize("policy", ["average", "sum", "adasum"])
def test_example_trains_with_equal_replicas(policy):
    run = subprocess.run([sys.executable, EXAMPLE, "--spawn", "2", "--policy", policy, "--epochs", "1",
                          "--train-limit", "6400", "--timeout", "60"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r"policy=(\w+) ranks=2 .* accuracy=([\d.]+)", run.stdout)
    assert found and found.group(1) == policy, run.stdout
    assert float(found.group(2)) > 50, run.stdout
