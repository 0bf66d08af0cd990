"""Fake third-party servers for tests (run on 127.0.0.1, driven by the real client libraries)."""
