"""The one error type nsysql raises for problems with the user's input.

Front ends turn it into a single line on stderr and exit code 2; nothing else is caught there, so a real bug
still shows its traceback.
"""


class NsysqlError(Exception):
    """A problem with an input file or an argument, stated in one line."""

    def __init__(self, message: str, path: str | None = None):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)
