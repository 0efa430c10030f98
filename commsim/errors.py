"""The one error hierarchy of commsim: every message names the offending value."""

from collections.abc import Mapping


def describe(value: object) -> str:
    """A YAML value as an error message shows it: ``'5XB'``, ``a mapping``, ``nothing (null)``."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


class CommsimError(Exception):
    """Base of every error commsim raises on bad input; the CLI prints it on one line, exit 2."""


class SpecError(CommsimError):
    """A topology, workload, flag or unit string is malformed or out of range."""


class ScheduleError(CommsimError):
    """An algorithm cannot run this collective, or a schedule fails the symbolic checker."""


class ParseError(CommsimError):
    """A log, trace or measurement file cannot be read."""
