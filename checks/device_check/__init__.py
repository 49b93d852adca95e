"""The gpu binding's device check (`python -m checks.device_check`, `make gpu-check`), one module per stage.

Stages run in separate processes under one time budget and append every
result as it is produced (record.py), so a run killed at a lent machine's
limit, or broken by one bad launch, keeps what it measured. speed_table.py turns a
stored run (results/) into the gpu binding's measured table.
"""
