"""Runnable examples; each has a test in tests/test_examples.py."""
