"""The Puzzle pipeline's stages (Llama-Nemotron §2), one module each, every one a
function of a ``PuzzleContext`` that writes its artefacts into the run directory and returns
at once when they are already there:

parent → build-library → distill → score → search (+ Pareto front) → export (+ FFN Fusion).
"""
