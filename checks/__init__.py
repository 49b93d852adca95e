"""Checks that run outside `make test`: each module runs as `python -m checks.NAME` from the repository root."""
