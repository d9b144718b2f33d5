"""Errors that name the file or parameter at fault and the fix."""


class WorkbookError(Exception):
    """Base class for every error the workbook raises on bad input."""


class DataFormatError(WorkbookError, ValueError):
    """A data file is malformed: names the file, the line and the problem."""

    def __init__(self, path, line: int | None, problem: str, fix: str | None = None):
        self.path, self.line, self.problem, self.fix = str(path), line, problem, fix
        where = f"{path}" + (f", line {line}" if line is not None else "")
        msg = f"{where}: {problem}"
        if fix:
            msg += f" — {fix}"
        super().__init__(msg)


class ParameterError(WorkbookError, ValueError):
    """A parameter (in a YAML file or a call) is unknown or out of range."""


class DatasetUnavailable(WorkbookError):
    """A dataset cannot be had on this machine (not downloaded, no mirror, no network)."""
