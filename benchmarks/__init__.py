"""Benchmarks for gactors against Pykka and raw gevent limits.

Run ``python -m benchmarks --help`` from the repository root. The harness itself uses
the standard library only; peers live in their own virtual environments under
``benchmarks/.venvs/`` and every workload runs in a fresh subprocess.
"""
