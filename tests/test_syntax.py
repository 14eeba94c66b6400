"""NodeIndex.below: what a rule walks, in walk()'s order."""
import ast

import pytest

from flake8_xla.analysis.syntax import SCOPES, NodeIndex, walk

SOURCE = '''
import torch

class Net(torch.nn.Module):
    def forward(self, x, scale=lambda v: v * 2):
        for step, batch in enumerate(x):
            total = sum(batch[i] for i in range(3)) + (lambda y: y + 1)(step)
        return scale(total)

def loop(loader):
    while True:
        try:
            data = next(loader)
        except StopIteration:
            break
        else:
            yield {k: v.to("cpu") for k, v in data.items()}
'''


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


@pytest.mark.parametrize("stop", [(), SCOPES, (ast.Lambda,), (ast.For, ast.Call)])
def test_below_is_walk_for_every_subtree_and_pair_of_roots(stop) -> None:
    tree = ast.parse(SOURCE)
    index = NodeIndex(tree)
    nodes = walk([tree])
    for node in nodes:
        assert _same(index.below([node], stop), walk([node], stop))
    for first, second in zip(nodes, nodes[7:]):
        assert _same(index.below([first, second], stop), walk([first, second], stop))
    body = tree.body[1].body[0].body
    assert _same(index.below(body, stop), walk(body, stop))


def test_below_keeps_walk_order_and_stops_inside_stop_nodes() -> None:
    tree = ast.parse("f(a, lambda: b)\n")
    index = NodeIndex(tree)
    call = tree.body[0].value
    assert [type(n).__name__ for n in index.below([call], (ast.Lambda,))] == ["Call", "Lambda", "Name", "Name"]
    assert [getattr(n, "id", None) for n in index.below([call])] == [None, None, "b", None, "a", "f"]


def test_below_walks_a_node_from_outside_the_file() -> None:
    index = NodeIndex(ast.parse("x = 1\n"))
    made = ast.BinOp(ast.Name("y", ast.Load()), ast.Add(), ast.Constant(2))
    assert [type(n).__name__ for n in index.below([made])] == ["BinOp", "Constant", "Add", "Name"]
