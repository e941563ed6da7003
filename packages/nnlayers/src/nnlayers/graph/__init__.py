"""Compiling expressions into plans and running them: :func:`compile`, :class:`Graph`."""

from .graph import Graph, RunState, compile
from .plan import Plan
from .topo import topological_order

__all__ = ["Graph", "Plan", "RunState", "compile", "topological_order"]
