"""The checks of check_manifests.py, one module per kind of file (see its docstring)."""
