"""The ``reasonrl`` command line."""
