"""engine: the 3D-parallel PyTorch training engine and the launcher that starts it from a rank map.

Not built yet: tracked by issue #6. It must never import ortools or networkx.
"""
