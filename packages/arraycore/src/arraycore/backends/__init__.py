"""Backends that ship inside arraycore: only the NumPy reference backend."""
