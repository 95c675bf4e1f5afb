"""Generated gRPC stubs of proto/berth/v1 (built by setup.py, never edited by hand)."""
