"""The one error type nsysql raises for problems with the user's input.

Front ends turn it into a single line on stderr and exit code 2; nothing else is caught there, so a real bug
still shows its traceback.
"""


class NsysqlError(Exception):
    """A problem with an input file or an argument, stated in one line.

    `option`: the argument (or arguments) the problem is with, by its Python name (`window`), which the message
    writes in backticks (`` `window` is START:END ... ``): the library names no command-line flag; the CLI puts
    its flag (`--window`) in that place."""

    def __init__(self, message: str, path: str | None = None, option: str | tuple[str, ...] | None = None):
        self.path = path
        self.message = message  # without the path the whole text puts in front
        self.options = (option,) if isinstance(option, str) else tuple(option or ())
        super().__init__(f"{path}: {message}" if path else message)


# where DuckDB, wrapping an exception raised by a Python object it scans (an Arrow stream), appends its traceback
_PYTHON_DETAIL = (" Detail: Python exception", "Traceback (most recent call last)")


def one_line(e: BaseException) -> str:
    """An error's message as one line: its first line, without the Python traceback DuckDB appends to an
    exception it caught from a Python object it was scanning."""
    text = (str(e).splitlines() or [type(e).__name__])[0]
    for marker in _PYTHON_DETAIL:
        text = text.split(marker, 1)[0]
    return text.rstrip(" .:") or type(e).__name__


def utf8_path(path, what: str = "") -> None:
    """NsysqlError unless `path` is valid UTF-8. Linux allows any bytes in a name (Python holds the others as
    surrogates), but DuckDB and SQLite's ADBC driver take paths as UTF-8 text only. `what`: how the user gave it
    (`--cache-dir`), for the message."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NsysqlError(
            f"{what + ' ' if what else ''}{text}: the path is not valid UTF-8, and DuckDB and SQLite's driver "
            "read UTF-8 paths only; rename it, or link to it under a UTF-8 name (ln -s)"
        ) from None
