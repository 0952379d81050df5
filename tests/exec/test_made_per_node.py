"""MadePerNode (gpu_engine.exec.made_once): one value per node object and variant, dropped with the node."""

from __future__ import annotations

import gc

from gpu_engine.exec.made_once import MadePerNode


class _Node:
    """A stand-in plan node: equal to every other one, so only identity can tell them apart."""

    def __eq__(self, other):
        return isinstance(other, _Node)

    def __hash__(self):
        return 0


def test_one_value_per_node_object_and_variant_dropped_with_the_node():
    made = MadePerNode()
    first, second = _Node(), _Node()
    assert made.get(first, lambda: "a") == "a"
    assert made.get(first, lambda: "again") == "a"  # made once for this object
    assert made.get(second, lambda: "b") == "b"  # an equal node is another object: its own value
    assert made.get(first, lambda: "eager", variant=False) == "eager"  # another variant: its own value
    del first
    gc.collect()
    assert len(made._values) == 1  # the collected node's values went with it
    assert made.get(second, lambda: "again") == "b"
