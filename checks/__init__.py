"""Checks of the project that run outside `make test`, each by hand: `python -m checks.<name>` from the repository root.

They take longer than CI's budget, need tools CI lacks, or change a copy of the tree;
docs/development.md ("Checks outside `make test`") says what each one shows and when to run it.
"""
