"""Checking the model against reality: measured rows, nccl-tests logs, validate, calibrate."""
