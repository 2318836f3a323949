"""Test helpers for plugin authors: the contract checks and throw-away distributions."""
